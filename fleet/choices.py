"""Device states and health levels (their colours live in static/dashboard/css)."""

from django.db import models


class DeviceState(models.TextChoices):
    """The operational state, changed by people and by remediation."""

    IN_SERVICE = "in_service", "In service"
    REBOOTING = "rebooting", "Rebooting"
    REPAIR = "repair", "In repair"
    DRAINED = "drained", "Drained"
    MAINTENANCE = "maintenance", "In maintenance"
    UNDER_REPAIR = "under_repair", "Under repair"  # on the repair ladder, until its check passes


class Health(models.TextChoices):
    """What the latest snapshot says about a device."""

    HEALTHY = "healthy", "Healthy"
    WARNING = "warning", "Warning"
    CRITICAL = "critical", "Critical"
    UNKNOWN = "unknown", "No recent data"



class ActionKind(models.TextChoices):
    """What an operator or the remediation policy does to a device (or to automation)."""

    REBOOT = "reboot", "Reboot"  # a reset of the device (its spec's reboot action)
    RESTART_APPLICATION = "restart_application", "Restart application"
    REBOOT_HOST = "reboot_host", "Reboot host"
    DRAIN = "drain", "Drain"
    REPAIR = "repair", "Send to repair"
    RETURN_TO_SERVICE = "return_to_service", "Return to service"
    MAINTENANCE = "maintenance", "Maintenance"
    PAUSE = "pause", "Pause automation"
    RESUME = "resume", "Resume automation"


class ActionStatus(models.TextChoices):
    PENDING = "pending", "Pending"  # claimed and recorded; the call to the device not made yet
    ISSUED = "issued", "Issued"  # the device was told; waiting to see it healthy again
    SUCCEEDED = "succeeded", "Succeeded"
    FAILED = "failed", "Failed"
    DRY_RUN = "dry_run", "Dry run (not done)"
    # The repair ladder's outcomes (fleet/driver_errors): SUCCEEDED there is "repaired and
    # validated" (its diagnostic passed); the others say what happened instead.
    NOT_VALIDATED = "not_validated", "Repaired, not validated"  # back on health alone: no diagnostic for its type
    PULLED = "pulled", "Pulled for inspection"  # out of service (state repair)
    NEEDS_PERSON = "needs_person", "Needs a person"  # no rung left that can run here: drained
    SKIPPED = "skipped", "Skipped (cannot run here)"  # a rung not configured or not supported on the host


class Rung(models.TextChoices):
    """The repair ladder's rungs, least disruptive first (fleet/driver_errors/ladder.py)."""

    RESTART_APPLICATION = "restart_application", "Restart application"
    RESET_DEVICE = "reset_device", "Reset device"
    REBOOT_HOST = "reboot_host", "Reboot host"
    INSPECT_HARDWARE = "inspect_hardware", "Out of service for inspection"
    NEEDS_PERSON = "needs_person", "Needs a person"  # not a rung: where the ladder stops when none above can run
