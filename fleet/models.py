from django.conf import settings
from django.db import models

from fleet.choices import ActionKind, ActionStatus, DeviceState, Health


class HostQuerySet(models.QuerySet):
    def in_shard(self, shard: int, shards: int):
        return self.alias(shard=models.F("id") % shards).filter(shard=shard)

    def emulated(self):
        return self.filter(agent_queue="")

    def with_agent(self):
        return self.exclude(agent_queue="")


class Host(models.Model):
    name = models.CharField(max_length=128, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    # Set by the host agent (fleet/agent) that registered the host: the queue it consumes,
    # and when it last registered or polled. Empty for an emulated host.
    agent_queue = models.CharField(max_length=200, blank=True)
    agent_seen_at = models.DateTimeField(null=True, blank=True)
    # What the workload manager (SCHEDULER, fleet/scheduler) said of this host as a node at
    # the last sync: its state and drain reason, the jobs on its GPUs, or why it could not say.
    scheduler_state = models.CharField(max_length=64, blank=True)
    scheduler_reason = models.CharField(max_length=255, blank=True)
    scheduler_jobs = models.JSONField(default=list, blank=True)
    scheduler_error = models.CharField(max_length=500, blank=True)
    scheduler_synced_at = models.DateTimeField(null=True, blank=True)

    objects = HostQuerySet.as_manager()

    class Meta:
        ordering = ["name"]

    def __str__(self):
        return self.name

    @property
    def has_agent(self) -> bool:
        return bool(self.agent_queue)

    def scheduler_jobs_on(self, index: int) -> list[dict]:
        """The scheduler's jobs holding GPU ``index`` of this host, at the last sync."""
        return [job for job in self.scheduler_jobs or [] if index in job.get("gpus", [])]


class DeviceQuerySet(models.QuerySet):
    def for_dashboard(self):
        """Everything a fleet listing shows, in one query."""
        return self.select_related("host").order_by("host__name", "index")

    def matching(self, *, host: str = "", device_type: str = ""):
        """The devices of one host and/or one type (an empty filter matches all): the fleet
        page and the API filter alike."""
        queryset = self
        if host:
            queryset = queryset.filter(host__name=host)
        if device_type:
            queryset = queryset.filter(device_type=device_type)
        return queryset


class Device(models.Model):
    host = models.ForeignKey(Host, on_delete=models.CASCADE, related_name="devices")
    serial = models.CharField(max_length=160, unique=True)
    device_type = models.CharField(max_length=32, db_index=True)
    model = models.CharField(max_length=64, blank=True)
    index = models.PositiveSmallIntegerField(help_text="Slot of the device on its host")
    state = models.CharField(
        max_length=16, choices=DeviceState.choices, default=DeviceState.IN_SERVICE, db_index=True
    )
    state_changed_at = models.DateTimeField(null=True, blank=True)
    maintenance_until = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    # When the host's agent last failed to find the device; its history stays.
    absent_since = models.DateTimeField(null=True, blank=True)
    # The control actions (e.g. "reboot") the spec of a real device declares, as its agent
    # found them: the central stack may not have the spec (it can live in the agent's
    # ASIMOV_SPEC_DIRS). Emulated devices leave it empty (their specs are built in).
    control_actions = models.JSONField(default=list, blank=True)
    # The workload the device serves (a job or service name; set by the agent, the API or the
    # emulator): automation never takes more than DRIVER_ERROR_MAX_PER_WORKLOAD of one at once.
    workload = models.CharField(max_length=128, blank=True, db_index=True)

    objects = DeviceQuerySet.as_manager()

    class Meta:
        ordering = ["host__name", "index"]
        constraints = [
            models.UniqueConstraint(fields=["host", "index"], name="device_unique_slot"),
        ]
        permissions = [
            ("operate_device", "Can reboot, repair or drain a device"),
        ]

    def __str__(self):
        return f"{self.serial} ({self.device_type} on {self.host_id})"


class HostProcess(models.Model):
    """A PyTorch process that polls its host's agent for Kineto captures (fleet/agent/kineto.py),
    as the agent last reported it: a rank of a job, the job's launcher, or a lone process."""

    host = models.ForeignKey(Host, on_delete=models.CASCADE, related_name="processes")
    pid = models.PositiveIntegerField()
    command = models.CharField(max_length=512, blank=True)
    parent = models.PositiveIntegerField(null=True, blank=True)
    role = models.CharField(max_length=16, default="process")  # rank, launcher, process
    job = models.JSONField(default=dict, blank=True)  # torchrun's and Slurm's variables only
    gpus = models.JSONField(default=list, blank=True)  # the device indexes it created contexts on
    first_seen = models.DateTimeField()
    last_poll = models.DateTimeField()

    class Meta:
        ordering = ["host__name", "pid"]
        constraints = [models.UniqueConstraint(fields=["host", "pid"], name="host_process_unique_pid")]

    def __str__(self):
        return f"{self.pid} on {self.host_id}"

    @property
    def rank(self) -> int | None:
        value = self.job.get("RANK", "")
        return int(value) if value.isdigit() else None

    @property
    def world_size(self) -> int | None:
        value = self.job.get("WORLD_SIZE", "")
        return int(value) if value.isdigit() else None

    @property
    def run_id(self) -> str:
        return self.job.get("TORCHELASTIC_RUN_ID") or self.job.get("SLURM_JOB_ID") or ""


class Counter(models.Model):
    """The Asicmon counter catalogue, mirrored in the database (the API lists it)."""

    id = models.SmallAutoField(primary_key=True)
    name = models.CharField(max_length=64, unique=True)
    unit = models.CharField(max_length=16, blank=True)
    kind = models.CharField(max_length=16)
    description = models.CharField(max_length=255, blank=True)

    class Meta:
        ordering = ["name"]

    def __str__(self):
        return self.name


class HealthEvent(models.Model):
    """A stretch of time during which one health rule fired for a device at one level."""

    device = models.ForeignKey(Device, on_delete=models.CASCADE, related_name="health_events")
    rule = models.CharField(max_length=32)
    level = models.CharField(max_length=16, choices=Health.choices)
    reason = models.CharField(max_length=255)
    values = models.JSONField(default=dict)
    started_at = models.DateTimeField(db_index=True)
    ended_at = models.DateTimeField(null=True, blank=True)
    # The trace Asicmon captured by itself when this event opened (traces.Trace id), if any.
    trace_id = models.PositiveIntegerField(null=True, blank=True)

    class Meta:
        ordering = ["-started_at", "-id"]
        constraints = [
            # Two workers polling the same cycle open one event, not two.
            models.UniqueConstraint(
                fields=["device", "rule"], condition=models.Q(ended_at__isnull=True), name="one_open_event_per_rule"
            ),
        ]

    def __str__(self):
        return f"{self.device_id} {self.rule} {self.level} from {self.started_at:%H:%M:%S}"


class Action(models.Model):
    """Something done to a device (or to automation), by a person or by a rule, and how it went."""

    device = models.ForeignKey(Device, on_delete=models.CASCADE, related_name="actions", null=True, blank=True)
    kind = models.CharField(max_length=32, choices=ActionKind.choices)
    status = models.CharField(max_length=16, choices=ActionStatus.choices, default=ActionStatus.PENDING)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True)
    rule = models.CharField(max_length=32, blank=True, help_text="The health rule that asked for it, if automated")
    reason = models.CharField(max_length=500, blank=True)
    outcome = models.CharField(max_length=500, blank=True)
    until = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    issued_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # The repair ladder (fleet/driver_errors): the cause it climbs for, the rung, and the
    # validation check's result before the device went back to service.
    cause = models.CharField(max_length=32, blank=True)
    rung = models.CharField(max_length=32, blank=True)
    serial = models.CharField(max_length=160, blank=True, db_index=True)  # follows the device across hosts
    check_passed = models.BooleanField(null=True, blank=True)
    check_detail = models.CharField(max_length=500, blank=True)
    # The host command a rung or its check ran, secrets masked (shown to operators only),
    # and the diagnostic's output as it came (its last CHECK_OUTPUT_MAX characters).
    command = models.CharField(max_length=500, blank=True)
    check_output = models.TextField(blank=True)

    CHECK_OUTPUT_MAX = 20000

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["device", "kind", "created_at"], name="action_device_kind_idx")]

    def __str__(self):
        return f"{self.kind} of {self.device_id}: {self.status}"

    @property
    def actor(self) -> str:
        if self.user_id:
            return self.user.get_username()
        return f"rule {self.rule}" if self.rule else "automation"


class Automation(models.Model):
    """The fleet-wide brake: one row. Paused automation acts on nothing until resumed."""

    id = models.PositiveSmallIntegerField(primary_key=True, default=1)
    paused = models.BooleanField(default=False)
    reason = models.CharField(max_length=500, blank=True)
    changed_at = models.DateTimeField(null=True, blank=True)

    def __str__(self):
        return "paused" if self.paused else "running"

    @classmethod
    def current(cls) -> "Automation":
        row, _ = cls.objects.get_or_create(id=1)
        return row

    @classmethod
    def read(cls) -> "Automation":
        """The brake's state for a page: one query, nothing written (running if no row yet)."""
        return cls.objects.filter(id=1).first() or cls(id=1)


class DriverError(models.Model):
    """A driver error event (an Xid, an SXid, an amdgpu RAS error) on one device in one time
    bucket, with how often it came. Keyed by serial, so it follows the device across hosts."""

    device = models.ForeignKey(Device, on_delete=models.SET_NULL, null=True, blank=True, related_name="driver_errors")
    serial = models.CharField(max_length=160, blank=True, db_index=True)  # "" when no device of ours matched
    host = models.CharField(max_length=128)
    vendor = models.CharField(max_length=16)
    code = models.CharField(max_length=32)
    name = models.CharField(max_length=128)
    meaning = models.CharField(max_length=500, blank=True)
    severity = models.CharField(max_length=16)
    action = models.CharField(max_length=32)  # the catalogue's immediate action
    cause = models.CharField(max_length=32, blank=True)
    hardware = models.BooleanField(default=False)  # a fault of the device itself (repeat offenders)
    known = models.BooleanField(default=True)
    detail = models.CharField(max_length=500, blank=True)
    raw = models.CharField(max_length=1000, blank=True)
    source = models.CharField(max_length=16, blank=True)
    address = models.CharField(max_length=32, blank=True)
    count = models.PositiveBigIntegerField(default=1)
    first_seen = models.DateTimeField(db_index=True)
    last_seen = models.DateTimeField()
    bucket = models.BigIntegerField()
    fingerprint = models.CharField(max_length=40)  # sha1 of vendor, code, address and masked detail
    # What remediation did about it (the Action it led to), filled by the ladder.
    handled_by = models.ForeignKey(Action, on_delete=models.SET_NULL, null=True, blank=True, related_name="driver_errors")
    outcome = models.CharField(max_length=200, blank=True)

    class Meta:
        ordering = ["-first_seen", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["host", "serial", "fingerprint", "bucket"], name="driver_error_once_per_bucket"),
        ]
        indexes = [
            models.Index(fields=["serial", "first_seen"], name="driver_error_serial_idx"),
            models.Index(fields=["device", "last_seen"], name="driver_error_recent_idx"),  # the ladder's pending
            # the offenders' window and retention: a range of first_seen, with what the ranking
            # reads (SQLite answers it from the index alone)
            models.Index(fields=["first_seen", "serial", "last_seen", "hardware", "action", "cause", "host"],
                         name="driver_error_window_idx"),
        ]

    def __str__(self):
        return f"{self.vendor} {self.code} on {self.serial or self.address} x{self.count}"
