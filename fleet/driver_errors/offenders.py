"""Repeat offenders, fleet-wide: a device's incidents follow its serial across hosts and
reboots (errors and repairs are kept by serial, not by host or slot).

An *incident* is a burst of driver errors on one device that call for action: errors less
than OFFENDER_INCIDENT_GAP_S apart are one incident (a 48 and the 63 after it, a flood). It is a
*hardware* incident when one of its errors is a fault of the device itself (the catalogue's
``hardware``). A device with OFFENDER_HARDWARE_INCIDENTS hardware incidents within
OFFENDER_WINDOW_S is recommended for pulling, even when every repair's check passed.

The ranking (the offenders page and API) reads the window only (errors first seen within
OFFENDER_WINDOW_S), through the driver_error_window index: its cost follows the errors of the
window, not every error ever stored. The
database groups the window's errors into incidents and ranks the devices (`_ranked`, one
query); only the devices shown are then read row by row for their causes, hosts and MTBI.
A device's own record reads its history by serial (kept DRIVER_ERROR_RETENTION_DAYS).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection
from django.utils import timezone

from fleet.models import Action, Device, DriverError

__all__ = ["Incident", "Offender", "device_record", "incidents", "ranking"]

DAYS_30 = 30 * 86400.0
_FIELDS = ("serial", "first_seen", "last_seen", "cause", "code", "host", "hardware")


@dataclass
class Incident:
    serial: str
    started: datetime
    ended: datetime
    causes: set[str] = field(default_factory=set)
    codes: list[str] = field(default_factory=list)
    hosts: set[str] = field(default_factory=set)
    hardware: bool = False


@dataclass
class Offender:
    serial: str
    device_id: int | None
    host: str  # where it is now
    incidents: int
    hardware_incidents: int
    hosts: list[str]  # every host it had incidents on
    mtbi_s: float | None  # mean time between incidents
    per_30_days: dict[str, float]  # incidents per 30 days, by cause
    repairs: int
    pull: bool
    why: str


def incidents(serials: list[str] | None = None, since: datetime | None = None) -> dict[str, list[Incident]]:
    """Incidents by serial, oldest first (ignore-class errors are no incident), of the errors
    first seen ``since``."""
    rows = DriverError.objects.exclude(action="ignore").exclude(serial="")
    if serials is not None:
        rows = rows.filter(serial__in=serials)
    if since is not None:
        rows = rows.filter(first_seen__gte=since)
    out: dict[str, list[Incident]] = {}
    gap = settings.OFFENDER_INCIDENT_GAP_S
    if serials is None:  # the whole window: sorted here, not by an ORDER BY that would walk every error's serial
        found_rows = sorted(rows.order_by().values_list(*_FIELDS), key=lambda r: (r[0], r[1]))
    else:  # a few devices: through the serial index, in order
        found_rows = rows.order_by("serial", "first_seen").values_list(*_FIELDS)
    for serial, first, last, cause, code, host, hardware in found_rows:
        found = out.setdefault(serial, [])
        if not found or (first - found[-1].ended).total_seconds() > gap:
            found.append(Incident(serial, first, last))
        incident = found[-1]
        incident.ended = max(incident.ended, last)
        incident.causes.add(cause or "unknown")
        incident.codes.append(code)
        incident.hosts.add(host)
        incident.hardware |= hardware
    return out


def _offender(serial: str, found: list[Incident], device: Device | None, repairs: int, now: datetime) -> Offender:
    window = timedelta(seconds=settings.OFFENDER_WINDOW_S)
    hardware = sum(1 for i in found if i.hardware and i.started >= now - window)
    starts = [i.started.timestamp() for i in found]
    mtbi = (starts[-1] - starts[0]) / (len(starts) - 1) if len(starts) > 1 else None
    span = max(DAYS_30, now.timestamp() - starts[0]) if starts else DAYS_30
    causes = Counter(c for i in found for c in i.causes)
    pull = hardware >= settings.OFFENDER_HARDWARE_INCIDENTS
    why = (f"{hardware} hardware incidents within {settings.OFFENDER_WINDOW_S / 86400:g} days "
           f"(limit {settings.OFFENDER_HARDWARE_INCIDENTS}): pull it for inspection") if pull else ""
    return Offender(
        serial=serial, device_id=device.id if device else None, host=device.host.name if device else "",
        incidents=len(found), hardware_incidents=hardware, hosts=sorted({h for i in found for h in i.hosts}),
        mtbi_s=mtbi, per_30_days={c: n * DAYS_30 / span for c, n in causes.items()}, repairs=repairs,
        pull=pull, why=why,
    )


# Incidents as `incidents` makes them, in SQL: an error starts an incident when it came more
# than the gap after every earlier error of its device ended; a device's incidents counted,
# those with a hardware error that started in the window apart. {t0}/{t1}: the epoch seconds
# of first_seen/last_seen in the database's own words.
_RANKED = """
WITH w AS (
    SELECT id, serial, {t0} AS t0, {t1} AS t1, CASE WHEN hardware THEN 1 ELSE 0 END AS hw
    FROM fleet_drivererror
    WHERE first_seen >= %s AND action <> 'ignore' AND serial <> ''
), marked AS (
    SELECT id, serial, t0, hw, CASE WHEN t0 - MAX(t1) OVER (PARTITION BY serial ORDER BY t0, id
        ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) <= %s THEN 0 ELSE 1 END AS starts
    FROM w
), numbered AS (
    SELECT serial, t0, hw, SUM(starts) OVER (PARTITION BY serial ORDER BY t0, id ROWS UNBOUNDED PRECEDING) AS incident
    FROM marked
), incidents AS (
    SELECT serial, MIN(t0) AS started, MAX(hw) AS hw FROM numbered GROUP BY serial, incident
)
SELECT serial, SUM(CASE WHEN hw = 1 AND started >= %s THEN 1 ELSE 0 END) AS hardware, COUNT(*) AS incidents
FROM incidents GROUP BY serial ORDER BY hardware DESC, incidents DESC, serial LIMIT %s
"""
_EPOCH = {"sqlite": "((julianday({}) - 2440587.5) * 86400.0)", "postgresql": "EXTRACT(EPOCH FROM {})"}


def _ranked(since: datetime, limit: int) -> list[str]:
    """The serials of the ``limit`` devices with the most hardware incidents (then incidents)
    in the window, best first."""
    epoch = _EPOCH[connection.vendor]
    sql = _RANKED.format(t0=epoch.format("first_seen"), t1=epoch.format("last_seen"))
    with connection.cursor() as cursor:
        cursor.execute(sql, [connection.ops.adapt_datetimefield_value(since), settings.OFFENDER_INCIDENT_GAP_S,
                             since.timestamp(), limit])
        return [row[0] for row in cursor.fetchall()]


def ranking(limit: int = 50) -> list[Offender]:
    """Devices with incidents in the window, the most hardware incidents first (incidents,
    MTBI and rates over the window)."""
    now = timezone.now()
    since = now - timedelta(seconds=settings.OFFENDER_WINDOW_S)
    found = incidents(_ranked(since, limit), since=since)
    devices = {d.serial: d for d in Device.objects.filter(serial__in=list(found)).select_related("host")}
    repairs = Counter(Action.objects.filter(serial__in=list(found), rule="driver_error").values_list("serial", flat=True))
    out = [_offender(s, f, devices.get(s), repairs[s], now) for s, f in found.items()]
    out.sort(key=lambda o: (-o.hardware_incidents, -o.incidents, o.serial))
    return out[:limit]


def device_record(serial: str) -> Offender | None:
    """One device's record (its page), wherever it ran."""
    found = incidents([serial]).get(serial)
    if not found:
        return None
    device = Device.objects.filter(serial=serial).select_related("host").first()
    repairs = Action.objects.filter(serial=serial, rule="driver_error").count()
    return _offender(serial, found, device, repairs, timezone.now())
