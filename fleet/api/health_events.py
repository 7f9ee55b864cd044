"""The health events API's list: the health rules' events and a device's driver errors
(rule ``driver_error``), newest first, in one paginated list.

A driver error keeps the shape of a health event: its catalogue name and meaning are the
reason, its severity the level (critical, else warning), first and last seen the start and
end; ``values`` carries the code, vendor, count, the catalogue's action and what the repair
ladder did (rung, status, check). Its ``id`` is null (it is not a health event's id) and
``driver_error`` names its row in ``/api/driver-errors/``.

The two tables are merged in the database (a UNION of their keys ordered by start time) so
that a page costs one small query per table, however deep the offset.
"""

from __future__ import annotations

from django.db.models import F, IntegerField, Value

from fleet.choices import Health
from fleet.models import DriverError, HealthEvent

__all__ = ["RULE", "MergedEvents", "driver_error_event", "driver_errors_matching"]

RULE = "driver_error"
_HEALTH, _DRIVER = 0, 1


def driver_errors_matching(device: int | None, still_open: bool | None, level: str | None):
    """The driver errors the health events' filters let through (those of a device of ours;
    none when only open events are asked for: a driver error is over by its last line)."""
    rows = DriverError.objects.filter(device__isnull=False)
    if still_open:
        return rows.none()
    if device is not None:
        rows = rows.filter(device_id=device)
    if level == Health.CRITICAL:
        rows = rows.filter(severity="critical")
    elif level == Health.WARNING:
        rows = rows.exclude(severity="critical")
    return rows


def driver_error_event(row: DriverError) -> dict:
    action = row.handled_by
    return {
        "id": None,
        "device": row.device_id,
        "serial": row.serial,
        "rule": RULE,
        "level": Health.CRITICAL if row.severity == "critical" else Health.WARNING,
        "reason": f"{row.vendor} {row.code} {row.name}"[:255],
        "values": {
            "code": row.code, "vendor": row.vendor, "name": row.name, "meaning": row.meaning,
            "severity": row.severity, "count": row.count, "action": row.action, "cause": row.cause,
            "hardware": row.hardware, "known": row.known, "detail": row.detail, "outcome": row.outcome,
            "action_id": row.handled_by_id,
            "rung": action.rung if action else None,
            "action_status": action.status if action else None,
            "check_passed": action.check_passed if action else None,
            "check_detail": action.check_detail if action else None,
        },
        "started_at": row.first_seen,
        "ended_at": row.last_seen,
        "open": False,
        "trace_id": None,
        "driver_error": row.id,
    }


class MergedEvents:
    """A sequence the paginator can count and slice; a slice is the page's items as dicts."""

    def __init__(self, events, driver_errors, serialize) -> None:
        self.events = events.order_by()
        self.driver_errors = driver_errors.order_by()
        self.serialize = serialize  # a health event -> its dict

    def count(self) -> int:
        return self.events.count() + self.driver_errors.count()

    def __len__(self) -> int:
        return self.count()

    def __getitem__(self, page: slice) -> list[dict]:
        keys = self._keys()[page]
        health = {e.id: e for e in HealthEvent.objects.select_related("device").filter(
            id__in=[k for source, k, _ in keys if source == _HEALTH])}
        driver = {r.id: r for r in DriverError.objects.select_related("handled_by").filter(
            id__in=[k for source, k, _ in keys if source == _DRIVER])}
        items = []
        for source, key, _ in keys:
            if source == _HEALTH:
                items.append(self.serialize(health[key]))
            else:
                items.append(driver_error_event(driver[key]))
        return items

    def _keys(self):
        mark = Value(_HEALTH, output_field=IntegerField())
        health = self.events.annotate(merged_from=mark, at=F("started_at")).values_list("merged_from", "id", "at")
        mark = Value(_DRIVER, output_field=IntegerField())
        driver = self.driver_errors.annotate(merged_from=mark, at=F("first_seen")).values_list("merged_from", "id", "at")
        return health.union(driver, all=True).order_by("-at", "-merged_from", "-id")
