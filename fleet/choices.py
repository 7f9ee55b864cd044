"""Device states and health levels (their colours live in static/dashboard/css)."""

from django.db import models


class DeviceState(models.TextChoices):
    """The operational state, changed by people and by remediation."""

    IN_SERVICE = "in_service", "In service"
    REBOOTING = "rebooting", "Rebooting"
    REPAIR = "repair", "In repair"
    DRAINED = "drained", "Drained"


class Health(models.TextChoices):
    """What the latest snapshot says about a device."""

    HEALTHY = "healthy", "Healthy"
    WARNING = "warning", "Warning"
    CRITICAL = "critical", "Critical"
    UNKNOWN = "unknown", "No recent data"

