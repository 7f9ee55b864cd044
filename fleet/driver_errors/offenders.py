"""Repeat offenders, fleet-wide: a device's incidents follow its serial across hosts and
reboots (errors and repairs are kept by serial, not by host or slot).

An *incident* is a burst of driver errors on one device that call for action: errors less
than OFFENDER_INCIDENT_GAP_S apart are one incident (a 48 and the 63 after it, a flood). It is a
*hardware* incident when one of its errors is a fault of the device itself (the catalogue's
``hardware``). A device with OFFENDER_HARDWARE_INCIDENTS hardware incidents within
OFFENDER_WINDOW_S is recommended for pulling, even when every repair's check passed.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.utils import timezone

from fleet.asicmon import ladder_rules
from fleet.models import Action, Device, DriverError

__all__ = ["Incident", "Offender", "device_record", "incidents", "ranking"]

DAYS_30 = 30 * 86400.0


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
    """Incidents by serial, oldest first (ignore-class errors are no incident)."""
    rows = DriverError.objects.exclude(action="ignore").exclude(serial="")
    if serials is not None:
        rows = rows.filter(serial__in=serials)
    if since is not None:
        rows = rows.filter(last_seen__gte=since)
    out: dict[str, list[Incident]] = {}
    gap = settings.OFFENDER_INCIDENT_GAP_S
    for serial, first, last, cause, code, host, hardware in rows.order_by("serial", "first_seen").values_list(
            "serial", "first_seen", "last_seen", "cause", "code", "host", "hardware"):
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
    pull = ladder_rules.recommends_pull(hardware, settings.OFFENDER_HARDWARE_INCIDENTS)
    why = (f"{hardware} hardware incidents within {settings.OFFENDER_WINDOW_S / 86400:g} days "
           f"(limit {settings.OFFENDER_HARDWARE_INCIDENTS}): pull it for inspection") if pull else ""
    return Offender(
        serial=serial, device_id=device.id if device else None, host=device.host.name if device else "",
        incidents=len(found), hardware_incidents=hardware, hosts=sorted({h for i in found for h in i.hosts}),
        mtbi_s=mtbi, per_30_days={c: n * DAYS_30 / span for c, n in causes.items()}, repairs=repairs,
        pull=pull, why=why,
    )


def ranking(limit: int = 50) -> list[Offender]:
    """Devices with incidents, the most hardware incidents in the window first."""
    now = timezone.now()
    found = incidents()
    devices = {d.serial: d for d in Device.objects.filter(serial__in=list(found)).select_related("host")}
    repairs = Counter(Action.objects.filter(serial__in=list(found), rule="driver_error").exclude(status="skipped").values_list("serial", flat=True))
    out = [_offender(s, f, devices.get(s), repairs[s], now) for s, f in found.items()]
    out.sort(key=lambda o: (-o.hardware_incidents, -o.incidents, o.serial))
    return out[:limit]


def device_record(serial: str) -> Offender | None:
    """One device's record (its page), wherever it ran."""
    found = incidents([serial]).get(serial)
    if not found:
        return None
    device = Device.objects.filter(serial=serial).select_related("host").first()
    repairs = Action.objects.filter(serial=serial, rule="driver_error").exclude(status="skipped").count()
    return _offender(serial, found, device, repairs, timezone.now())
