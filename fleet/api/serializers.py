import time

from django.conf import settings
from rest_framework import serializers

from fleet.health import assess
from fleet.models import Counter, Device, Host


class HostSerializer(serializers.ModelSerializer):
    device_count = serializers.IntegerField(read_only=True)

    class Meta:
        model = Host
        fields = ["id", "name", "device_count", "created_at"]


class DeviceSerializer(serializers.ModelSerializer):
    """A device with its latest counters, read from the snapshot cache.

    The view puts the snapshots of the whole page into the context (one Redis call).
    """

    host = serializers.CharField(source="host.name", read_only=True)
    type = serializers.CharField(source="device_type", read_only=True)
    health = serializers.SerializerMethodField()
    latest = serializers.SerializerMethodField()

    class Meta:
        model = Device
        fields = ["id", "serial", "host", "type", "model", "index", "state", "health", "latest"]

    def _snapshot(self, device) -> dict | None:
        return self.context.get("snapshots", {}).get(device.id)

    def get_health(self, device) -> str:
        return assess(self._snapshot(device), now=time.time(), poll_interval=settings.POLL_INTERVAL).value

    def get_latest(self, device) -> dict | None:
        snapshot = self._snapshot(device)
        if snapshot is None:
            return None
        return {k: v for k, v in snapshot.items() if k not in {"health"}}


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
    points = serializers.ListField(child=serializers.ListField(), help_text="[[iso_time, value], ...]")
