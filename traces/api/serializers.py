from rest_framework import serializers

from emulator.serving.engine import SERVING_PROBLEMS
from emulator.workloads.tracing import PROBLEMS as CAPTURE_PROBLEMS
from traces.models import Job, Trace


class TraceSerializer(serializers.ModelSerializer):
    url = serializers.CharField(source="get_absolute_url", read_only=True, help_text="The trace's page")
    device_serial = serializers.CharField(source="device.serial", read_only=True, default=None)
    host = serializers.CharField(source="host_name", read_only=True)
    type = serializers.CharField(source="device_type", read_only=True)
    created_by = serializers.CharField(source="created_by.username", read_only=True, default=None)

    class Meta:
        model = Trace
        fields = [
            "id", "url", "name", "source", "status", "progress", "error",
            "device", "device_serial", "host", "type", "sw_version", "workload",
            "params", "events", "span_us", "raw_format", "raw_bytes", "stored_bytes",
            "iterations_kept", "iterations_run", "created_by", "created_at",
            "capture_started_at", "capture_ended_at", "analysis_started_at", "ready_at",
        ]
        read_only_fields = fields


class CreatedSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    url = serializers.CharField()
    status = serializers.CharField(required=False)


class HostCaptureRequestSerializer(serializers.Serializer):
    pid = serializers.IntegerField(min_value=1, help_text="The process: one of the host's processes (/api/hosts/)")
    duration_s = serializers.FloatField(default=5, help_text="Seconds to capture, 1-60")
    iterations = serializers.IntegerField(required=False, min_value=1, max_value=1000,
                                          help_text="Instead of seconds, this many optimizer steps")


class CaptureRequestSerializer(serializers.Serializer):
    duration_s = serializers.FloatField(default=5, help_text="Seconds to capture, 1-60")
    iterations = serializers.IntegerField(
        required=False, min_value=1, max_value=1000,
        help_text="Instead of seconds, this many optimizer steps of a real PyTorch process (hosts with an agent)")
    problems = serializers.ListField(
        child=serializers.ChoiceField(choices=[*CAPTURE_PROBLEMS, *SERVING_PROBLEMS]), required=False,
        help_text="Emulator problems to inject: for trying the advisor (its findings name them) "
                  f"{', '.join(CAPTURE_PROBLEMS)}; on an inference device serving requests, for trying "
                  f"the request join (the slowest requests' causes name them) {', '.join(SERVING_PROBLEMS)}",
    )


class UploadSerializer(serializers.Serializer):
    file = serializers.FileField(required=False, allow_empty_file=True,
                                 help_text="Kineto / PyTorch profiler JSON (.json, .json.gz), Chrome trace JSON, Chakra ET")
    upload = serializers.UUIDField(required=False, help_text="Instead of file: a finished resumable upload (/api/uploads/)")
    name = serializers.CharField(required=False, allow_blank=True, max_length=200)
    device = serializers.IntegerField(required=False, help_text="Id of the device it was recorded on")
    sw_version = serializers.CharField(required=False, allow_blank=True, max_length=32)


class BreakdownRowSerializer(serializers.Serializer):
    op = serializers.CharField()
    side = serializers.CharField()
    kind = serializers.CharField()
    count = serializers.IntegerField()
    total_us = serializers.FloatField()
    self_us = serializers.FloatField()
    mean_us = serializers.FloatField()
    p50_us = serializers.FloatField()
    p95_us = serializers.FloatField()
    max_us = serializers.FloatField()
    share = serializers.FloatField(help_text="total / trace span")


class BreakdownSerializer(serializers.Serializer):
    side = serializers.CharField()
    kind = serializers.CharField(allow_null=True)
    kinds = serializers.ListField(child=serializers.CharField(), help_text="Kinds present on this side")
    count = serializers.IntegerField(help_text="Number of rows (all are returned)")
    results = BreakdownRowSerializer(many=True)


class InstanceSerializer(serializers.Serializer):
    name = serializers.CharField()
    start_us = serializers.FloatField(help_text="From the trace's first event")
    dur_us = serializers.FloatField()
    self_us = serializers.FloatField()
    track = serializers.CharField(help_text="Thread or stream")
    launched_by = serializers.CharField(allow_null=True, help_text="Host operator that launched it")
    args = serializers.DictField()


class InstancesSerializer(serializers.Serializer):
    op = serializers.CharField()
    side = serializers.CharField()
    kinds = serializers.ListField(child=serializers.CharField())
    count = serializers.IntegerField()
    order = serializers.CharField()
    limit = serializers.IntegerField()
    offset = serializers.IntegerField()
    histogram = serializers.DictField()
    results = InstanceSerializer(many=True)
    group_by = serializers.CharField(required=False)
    groups = serializers.ListField(child=serializers.DictField(), required=False)


class JobRankSerializer(serializers.Serializer):
    rank = serializers.IntegerField()
    status = serializers.CharField()
    error = serializers.CharField()
    progress = serializers.FloatField()
    events = serializers.IntegerField(allow_null=True)
    device = serializers.IntegerField(source="device_id", allow_null=True)
    device_serial = serializers.CharField()
    host = serializers.CharField(source="host_name")
    trace = serializers.IntegerField(source="trace_id", allow_null=True)
    reasons = serializers.SerializerMethodField(help_text="What the fleet saw wrong with the device during the capture")

    def get_reasons(self, rank) -> list[str]:
        return [r["text"] for r in (rank.health or {}).get("reasons", [])]


class JobSerializer(serializers.ModelSerializer):
    url = serializers.CharField(source="get_absolute_url", read_only=True, help_text="The job's page")
    created_by = serializers.CharField(source="created_by.username", read_only=True, default=None)
    straggler_device = serializers.IntegerField(source="straggler_device_id", read_only=True, allow_null=True)
    ranks = JobRankSerializer(many=True, read_only=True)

    class Meta:
        model = Job
        fields = [
            "id", "url", "name", "source", "status", "progress", "error", "parallelism", "world_size",
            "device_type", "workload", "params", "straggler_rank", "straggler_device", "summary", "created_by",
            "created_at", "capture_started_at", "capture_ended_at", "analysis_started_at", "ready_at", "ranks",
        ]
        read_only_fields = fields


class JobCaptureRequestSerializer(serializers.Serializer):
    devices = serializers.ListField(child=serializers.IntegerField(), required=False,
                                    help_text="Device ids, in rank order")
    host = serializers.CharField(required=False, allow_blank=True, help_text="Or: every device of this host")
    type = serializers.CharField(required=False, allow_blank=True, help_text="And/or: every device of this type")
    run_id = serializers.CharField(
        required=False, allow_blank=True, max_length=128,
        help_text="Or: every rank of this real PyTorch job (torchrun's TORCHELASTIC_RUN_ID or SLURM_JOB_ID), on the "
                  "hosts whose agents its processes poll")
    duration_s = serializers.FloatField(default=5, help_text="Seconds to capture, 1-60")
    iterations = serializers.IntegerField(
        required=False, min_value=1, max_value=1000,
        help_text="Instead of seconds, this many optimizer steps of a real PyTorch process (hosts with an agent)")
    name = serializers.CharField(required=False, allow_blank=True, max_length=200)
    parallelism = serializers.ChoiceField(choices=["data", "tensor"], default="data")


class JobUploadSerializer(serializers.Serializer):
    files = serializers.ListField(child=serializers.FileField(allow_empty_file=True), required=False,
                                 help_text="One Kineto / PyTorch profiler trace per rank")
    uploads = serializers.ListField(child=serializers.UUIDField(), required=False,
                                    help_text="Instead of files: finished resumable uploads (/api/uploads/), one per rank")
    name = serializers.CharField(required=False, allow_blank=True, max_length=200)
    world_size = serializers.IntegerField(
        required=False, min_value=1,
        help_text="Instead of files: open a job of this many ranks, each sent on its own to ranks/ as it is ready")
    wait_s = serializers.IntegerField(
        required=False, min_value=10, max_value=7 * 24 * 3600,
        help_text="With world_size: how long to wait for every rank (JOB_RANKS_WAIT_S by default)")


class JobRankUploadSerializer(serializers.Serializer):
    file = serializers.FileField(required=False, allow_empty_file=True, help_text="The rank's trace file")
    upload = serializers.UUIDField(required=False, help_text="Instead of file: a finished resumable upload")
    rank = serializers.IntegerField(required=False, min_value=0,
                                    help_text="The rank (else the trace's distributedInfo.rank, else its file name's)")


class UploadStartSerializer(serializers.Serializer):
    filename = serializers.CharField(max_length=200)
    size = serializers.IntegerField(min_value=1, help_text="The file's size in bytes")


class UploadFinishSerializer(serializers.Serializer):
    size = serializers.IntegerField(min_value=0, help_text="The file's size in bytes, as declared at the start")


class UploadStateSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    url = serializers.CharField()
    filename = serializers.CharField()
    size = serializers.IntegerField()
    received = serializers.IntegerField(help_text="Bytes stored: the offset of the next chunk")
    finished = serializers.BooleanField()
    chunk_max_bytes = serializers.IntegerField()
