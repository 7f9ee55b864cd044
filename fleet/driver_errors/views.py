"""What pages show of driver errors: a device's errors (its page's table and graph marks),
the fleet page's counts, and the repeat offenders page."""

from __future__ import annotations

from datetime import timedelta

from django.contrib.auth.decorators import login_required, permission_required
from django.db.models import Count, Sum
from django.shortcuts import render
from django.utils import timezone
from django.views.decorators.http import require_safe

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
    """The fleet page's driver-error line: events and occurrences in the last ``hours``, by
    the catalogue's action (one grouped query)."""
    since = timezone.now() - timedelta(hours=hours)
    rows = (DriverError.objects.filter(last_seen__gte=since).values("action")
            .annotate(events=Count("id"), occurrences=Sum("count")).order_by("action"))
    by_action = {r["action"]: r["events"] for r in rows}
    return {
        "hours": hours,
        "events": sum(by_action.values()),
        "occurrences": sum(r["occurrences"] or 0 for r in rows),
        "by_action": by_action,
    }


@login_required
@permission_required("fleet.view_device", raise_exception=True)
@require_safe
def offenders(request):
    return render(request, "fleet/offenders.html", {"offenders": ranking(100)})
