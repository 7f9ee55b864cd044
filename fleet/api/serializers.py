from datetime import timedelta

from django.utils import timezone
from rest_framework import serializers

from fleet.agent import queues
from fleet.health.assessing import current_health
from fleet.health.detection import Assessment
from fleet.models import Action, Automation, Counter, Device, HealthEvent, Host, HostProcess


class HostProcessSerializer(serializers.ModelSerializer):
    rank = serializers.IntegerField(read_only=True, allow_null=True)
    world_size = serializers.IntegerField(read_only=True, allow_null=True)
    run_id = serializers.CharField(read_only=True)

    class Meta:
        model = HostProcess
        fields = ["pid", "command", "parent", "role", "rank", "world_size", "run_id", "job", "gpus", "first_seen",
                  "last_poll"]


class HostSerializer(serializers.ModelSerializer):
    device_count = serializers.IntegerField(read_only=True)
    processes = HostProcessSerializer(many=True, read_only=True, help_text=(
        "PyTorch processes polling the host's agent for Kineto captures (started with KINETO_USE_DAEMON=1)"))
    polled_by = serializers.SerializerMethodField(help_text='"emulator", or "agent" for a real machine')
    agent_alive = serializers.SerializerMethodField(help_text="Whether its agent said it was alive lately")
    capture_unavailable = serializers.SerializerMethodField(
        help_text="Why traces cannot be captured on this host; null where they can"
    )

    class Meta:
        model = Host
        fields = ["id", "name", "device_count", "created_at", "polled_by", "agent_seen_at", "agent_alive",
                  "capture_unavailable", "processes"]

    def get_polled_by(self, host) -> str:
        return "agent" if host.has_agent else "emulator"

    def get_agent_alive(self, host) -> bool | None:
        return queues.agent_is_alive(host) if host.has_agent else None

    def get_capture_unavailable(self, host) -> str | None:
        return queues.capture_unavailable_reason(host)


class DeviceSerializer(serializers.ModelSerializer):
    """A device with its latest counters, read from the snapshot cache.

    The view puts the snapshots of the whole page into the context (one Redis call).
    """

    host = serializers.CharField(source="host.name", read_only=True)
    type = serializers.CharField(source="device_type", read_only=True)
    health = serializers.SerializerMethodField()
    health_reasons = serializers.SerializerMethodField()
    latest = serializers.SerializerMethodField()

    class Meta:
        model = Device
        fields = [
            "id", "serial", "host", "type", "model", "index", "state", "maintenance_until", "absent_since",
            "health", "health_reasons", "latest",
        ]

    def _snapshot(self, device) -> dict | None:
        return self.context.get("snapshots", {}).get(device.id)

    def _assessment(self, device) -> Assessment:
        """Health as of now (a stale snapshot is 'unknown'), worked out once per device."""
        cache = self.context.setdefault("assessments", {})
        if device.id not in cache:
            cache[device.id] = current_health(self._snapshot(device))
        return cache[device.id]

    def get_health(self, device) -> str:
        return self._assessment(device).health.value

    def get_health_reasons(self, device) -> list[str]:
        return self._assessment(device).reasons

    def get_latest(self, device) -> dict | None:
        snapshot = self._snapshot(device)
        if snapshot is None:
            return None
        return {k: v for k, v in snapshot.items() if k not in {"health", "health_reasons"}}


class CounterSerializer(serializers.ModelSerializer):
    class Meta:
        model = Counter
        fields = ["name", "unit", "kind", "description"]


class SeriesSerializer(serializers.Serializer):
    device = serializers.IntegerField()
    counter = serializers.CharField()
    unit = serializers.CharField()
    since = serializers.DateTimeField()
    until = serializers.DateTimeField()
    resolution = serializers.ChoiceField(
        ["raw", "1m", "1h"], help_text="raw samples, or the samples of each minute / hour summed up by the store"
    )
    step = serializers.IntegerField(allow_null=True, help_text="Seconds between points; null for raw samples")
    points = serializers.ListField(
        child=serializers.ListField(),
        help_text="[[iso_time, value], ...] raw; [[iso_time, mean, min, max, count], ...] per step, iso_time "
        "ending the step (the samples in (iso_time - step, iso_time])",
    )


class HealthEventSerializer(serializers.ModelSerializer):
    serial = serializers.CharField(source="device.serial", read_only=True)
    open = serializers.SerializerMethodField()
    driver_error = serializers.SerializerMethodField(
        help_text="In the list, an event of rule driver_error: its id in /api/driver-errors/ (its own id is null)")

    class Meta:
        model = HealthEvent
        fields = [
            "id", "device", "serial", "rule", "level", "reason", "values", "started_at", "ended_at", "open", "trace_id",
            "driver_error",
        ]

    def get_driver_error(self, event) -> int | None:
        return None

    def get_open(self, event) -> bool:
        return event.ended_at is None


class ActionSerializer(serializers.ModelSerializer):
    serial = serializers.CharField(source="device.serial", read_only=True, default=None)
    actor = serializers.CharField(read_only=True, help_text="Who did it: a user name, or the rule that asked for it")
    user = serializers.CharField(source="user.username", read_only=True, default=None)

    class Meta:
        model = Action
        fields = [
            "id", "device", "serial", "kind", "status", "actor", "user", "rule", "reason", "outcome",
            "until", "created_at", "issued_at", "finished_at", "cause", "rung", "check_passed", "check_detail",
            "command", "check_output",
        ]

    def to_representation(self, action):
        """Viewers see the rung and its result; operators also the command it ran (masked)
        and the diagnostic's output."""
        data = super().to_representation(action)
        request = self.context.get("request")
        user = getattr(request, "user", None)
        if not (user and user.is_authenticated and user.has_perm("fleet.operate_device")):
            data.pop("command", None)
            data.pop("check_output", None)
        return data


OPERATOR_ACTIONS = ["reboot", "drain", "repair", "return_to_service", "maintenance"]
MAX_MAINTENANCE = timedelta(days=30)


class ActionRequestSerializer(serializers.Serializer):
    action = serializers.ChoiceField(choices=OPERATOR_ACTIONS)
    reason = serializers.CharField(max_length=500, required=False, allow_blank=True, default="")
    until = serializers.DateTimeField(required=False, help_text="End of maintenance (required for maintenance)")

    def validate(self, data):
        if data["action"] == "maintenance":
            until = data.get("until")
            if until is None:
                raise serializers.ValidationError({"until": "maintenance needs 'until', e.g. 2026-11-22T18:00:00Z."})
            now = timezone.now()
            if until <= now:
                raise serializers.ValidationError({"until": "'until' must be in the future."})
            if until - now > MAX_MAINTENANCE:
                raise serializers.ValidationError({"until": f"maintenance may last at most {MAX_MAINTENANCE.days} days."})
        elif "until" in data:
            raise serializers.ValidationError({"until": "only maintenance takes 'until'."})
        return data


class AutomationSerializer(serializers.ModelSerializer):
    class Meta:
        model = Automation
        fields = ["paused", "reason", "changed_at"]
        read_only_fields = ["changed_at"]
        extra_kwargs = {"paused": {"required": True}}  # a POST without it is a 400, not a KeyError


class CapacityGroupSerializer(serializers.Serializer):
    devices = serializers.IntegerField()
    serving = serializers.IntegerField()
    weight = serializers.IntegerField()
    headroom = serializers.FloatField()


class DeviceCapacitySerializer(serializers.Serializer):
    id = serializers.IntegerField()
    serial = serializers.CharField()
    host = serializers.CharField()
    type = serializers.CharField()
    state = serializers.CharField()
    health = serializers.CharField()
    may_serve = serializers.BooleanField()
    weight = serializers.IntegerField(help_text="0..100; 0 when the device may not serve")
    headroom = serializers.FloatField(help_text="1 - utilization; 0 when the device may not serve")
    utilization = serializers.FloatField(allow_null=True)


class CapacitySerializer(serializers.Serializer):
    devices = DeviceCapacitySerializer(many=True)
    by_type = serializers.DictField(child=CapacityGroupSerializer())
    by_host = serializers.DictField(child=CapacityGroupSerializer())
    total = CapacityGroupSerializer()
