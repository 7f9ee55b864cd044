"""What pages show of driver errors: a device's errors (its page's table and graph marks),
the fleet page's counts, and the repeat offenders page."""

from __future__ import annotations

from datetime import timedelta

from django.contrib.auth.decorators import login_required, permission_required
from django.db.models import Count, Sum
from django.shortcuts import render
from django.utils import timezone

from fleet.choices import DeviceState
from fleet.driver_errors.offenders import ranking
from fleet.models import Device, DriverError

__all__ = ["device_errors", "error_marks", "fleet_counts", "offenders"]

DEVICE_ROWS = 100


def device_errors(device: Device) -> list[DriverError]:
    """The device's newest errors (by serial: those of its earlier hosts too)."""
    return list(DriverError.objects.filter(serial=device.serial).select_related("handled_by")
                .order_by("-first_seen", "-id")[:DEVICE_ROWS])


def error_marks(rows: list[DriverError]) -> list[dict]:
    """Marks for the graphs' time axis, JSON-ready."""
    return [{"t": r.first_seen.isoformat(), "label": f"{'Xid ' if r.vendor == 'nvidia' else ''}{r.code}",
             "text": f"{r.name} ×{r.count}: {r.action}", "severity": r.severity} for r in rows]


def fleet_counts(hours: int = 24) -> dict:
    since = timezone.now() - timedelta(hours=hours)
    recent = DriverError.objects.filter(last_seen__gte=since)
    totals = recent.aggregate(events=Count("id"), occurrences=Sum("count"))
    by_action = dict(recent.values_list("action").annotate(n=Count("id")).order_by())
    return {
        "hours": hours,
        "events": totals["events"] or 0,
        "occurrences": totals["occurrences"] or 0,
        "by_action": by_action,
        "under_repair": Device.objects.filter(state=DeviceState.UNDER_REPAIR).count(),
    }


@login_required
@permission_required("fleet.view_device", raise_exception=True)
def offenders(request):
    return render(request, "fleet/offenders.html", {"offenders": ranking(100)})
