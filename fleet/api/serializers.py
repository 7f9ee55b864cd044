import time

from django.conf import settings
from rest_framework import serializers

from fleet.health import Assessment, assess_with_reasons
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
    health_reasons = serializers.SerializerMethodField()
    latest = serializers.SerializerMethodField()

    class Meta:
        model = Device
        fields = ["id", "serial", "host", "type", "model", "index", "state", "health", "health_reasons", "latest"]

    def _snapshot(self, device) -> dict | None:
        return self.context.get("snapshots", {}).get(device.id)

    def _assessment(self, device) -> Assessment:
        """Health as of now (a stale snapshot is 'unknown'), worked out once per device."""
        cache = self.context.setdefault("assessments", {})
        if device.id not in cache:
            cache[device.id] = assess_with_reasons(
                self._snapshot(device), now=time.time(), poll_interval=settings.POLL_INTERVAL
            )
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
    points = serializers.ListField(child=serializers.ListField(), help_text="[[iso_time, value], ...]")
