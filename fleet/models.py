from django.db import models

from fleet.choices import DeviceState


class HostQuerySet(models.QuerySet):
    def in_shard(self, shard: int, shards: int):
        return self.alias(shard=models.F("id") % shards).filter(shard=shard)


class Host(models.Model):
    name = models.CharField(max_length=128, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = HostQuerySet.as_manager()

    class Meta:
        ordering = ["name"]

    def __str__(self):
        return self.name


class DeviceQuerySet(models.QuerySet):
    def for_dashboard(self):
        """Everything a fleet listing shows, in one query."""
        return self.select_related("host").order_by("host__name", "index")


class Device(models.Model):
    host = models.ForeignKey(Host, on_delete=models.CASCADE, related_name="devices")
    serial = models.CharField(max_length=64, unique=True)
    device_type = models.CharField(max_length=32, db_index=True)
    model = models.CharField(max_length=64, blank=True)
    index = models.PositiveSmallIntegerField(help_text="Slot of the device on its host")
    state = models.CharField(
        max_length=16, choices=DeviceState.choices, default=DeviceState.IN_SERVICE, db_index=True
    )
    created_at = models.DateTimeField(auto_now_add=True)

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


class Counter(models.Model):
    """The Asicmon counter catalogue, mirrored so that samples refer to a small id."""

    id = models.SmallAutoField(primary_key=True)
    name = models.CharField(max_length=64, unique=True)
    unit = models.CharField(max_length=16, blank=True)
    kind = models.CharField(max_length=16)
    description = models.CharField(max_length=255, blank=True)

    class Meta:
        ordering = ["name"]

    def __str__(self):
        return self.name


class Sample(models.Model):
    """One value of one counter of one device at one poll cycle.

    The composite primary key (device, counter, ts) is the index for "one device, one
    counter, a time range", and makes a repeated poll of the same cycle a no-op. The
    foreign keys carry no database constraint: checking two of them per row doubled the
    cost of an insert on PostgreSQL, and the only writer takes ids from the tables
    themselves (Django still cascades a device's deletion to its samples).
    """

    pk = models.CompositePrimaryKey("device", "counter", "ts")
    device = models.ForeignKey(Device, on_delete=models.CASCADE, db_index=False, db_constraint=False)
    counter = models.ForeignKey(Counter, on_delete=models.PROTECT, db_index=False, db_constraint=False)
    ts = models.DateTimeField()
    value = models.FloatField()

    class Meta:
        indexes = [models.Index(fields=["ts"], name="sample_ts_idx")]

    def __str__(self):
        return f"{self.device_id}/{self.counter_id}@{self.ts:%H:%M:%S}={self.value}"
