"""Repeat offenders, fleet-wide: a device's incidents follow its serial across hosts and
reboots (errors and repairs are kept by serial, not by host or slot).

An *incident* is a burst of driver errors on one device that call for action: errors less
than OFFENDER_INCIDENT_GAP_S apart are one incident (a 48 and the 63 after it, a flood). It is a
*hardware* incident when one of its errors is a fault of the device itself (the catalogue's
``hardware``). A device with OFFENDER_HARDWARE_INCIDENTS hardware incidents within
OFFENDER_WINDOW_S is recommended for pulling, even when every repair's check passed.

The ranking (the offenders page and API) reads the window only (errors first seen within
OFFENDER_WINDOW_S), through the driver_error_window index: its cost follows the errors of the
window, not every error ever stored. It reads them lean (times as epoch seconds, no model or
datetime objects) and tallies each device's incidents in one pass. A device's own record
reads its history by serial (kept DRIVER_ERROR_RETENTION_DAYS) and is tallied the same way.
"""

from __future__ import annotations

import heapq
import math
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection
from django.utils import timezone

from fleet.asicmon import ladder_rules
from fleet.models import Action, Device

__all__ = ["Offender", "Tally", "device_record", "ranking"]

DAYS_30 = 30 * 86400.0
# What a tally needs of each error, lean: when it came and went in epoch seconds (in the
# database's own words), whether it is a fault of the device, its cause and host.
# Ignore-class errors are no incident. The window is read from driver_error_window_idx alone
# (its columns are the index's); no ORDER BY, which would have the database walk the serial
# index through every error instead.
_ROWS = ("SELECT serial, {t0}, {t1}, hardware, cause, host FROM fleet_drivererror "
         "WHERE action <> 'ignore' AND serial <> '' AND {where}")
_EPOCH = {"sqlite": "((julianday({}) - 2440587.5) * 86400.0)", "postgresql": "date_part('epoch', {})"}


@dataclass
class Tally:
    """One device's incidents."""

    incidents: int = 0
    hardware: int = 0  # hardware incidents that started in the window
    first_start: float = 0.0  # epoch seconds of its first and last incident's start
    last_start: float = 0.0
    causes: Counter = field(default_factory=Counter)  # incidents by cause
    hosts: set = field(default_factory=set)  # every host it had incidents on


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


def _rows(where: str, params: list) -> dict[str, list[tuple]]:
    """Errors by serial: (first, last, hardware, cause, host), times in epoch seconds."""
    epoch = _EPOCH[connection.vendor]
    sql = _ROWS.format(t0=epoch.format("first_seen"), t1=epoch.format("last_seen"), where=where)
    by_serial: dict[str, list[tuple]] = {}
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        for serial, first, last, hardware, cause, host in cursor.fetchall():
            by_serial.setdefault(serial, []).append((float(first), float(last), bool(hardware), cause or "unknown", host))
    return by_serial


def tally(errors: list[tuple], window_start: float) -> Tally:
    """A device's incidents from its errors: an error more than OFFENDER_INCIDENT_GAP_S after
    every earlier one ended starts an incident (a 48 and the 63 after it, a flood: one); an
    incident is a hardware one when one of its errors is. (The ranking's hot loop: plain
    comparisons only.)"""
    gap, t = settings.OFFENDER_INCIDENT_GAP_S, Tally()
    ended = started = -math.inf
    hardware, causes = False, set()
    for first, last, is_hardware, cause, host in sorted(errors):
        if first - ended > gap:  # a new incident: the one before it is complete
            if hardware and started >= window_start:
                t.hardware += 1
            for c in causes:
                t.causes[c] += 1
            t.incidents, started, ended, hardware, causes = t.incidents + 1, first, last, False, set()
            if t.incidents == 1:
                t.first_start = first
            t.last_start = first
        if last > ended:
            ended = last
        if is_hardware:
            hardware = True
        causes.add(cause)
        t.hosts.add(host)
    if hardware and started >= window_start:
        t.hardware += 1
    for c in causes:
        t.causes[c] += 1
    return t


def _offender(serial: str, t: Tally, device: Device | None, repairs: int, now: datetime) -> Offender:
    mtbi = (t.last_start - t.first_start) / (t.incidents - 1) if t.incidents > 1 else None
    span = max(DAYS_30, now.timestamp() - t.first_start)
    pull = ladder_rules.recommends_pull(t.hardware, settings.OFFENDER_HARDWARE_INCIDENTS)
    why = (f"{t.hardware} hardware incidents within {settings.OFFENDER_WINDOW_S / 86400:g} days "
           f"(limit {settings.OFFENDER_HARDWARE_INCIDENTS}): pull it for inspection") if pull else ""
    return Offender(
        serial=serial, device_id=device.id if device else None, host=device.host.name if device else "",
        incidents=t.incidents, hardware_incidents=t.hardware, hosts=sorted(t.hosts), mtbi_s=mtbi,
        per_30_days={c: n * DAYS_30 / span for c, n in t.causes.items()}, repairs=repairs, pull=pull, why=why,
    )


def ranking(limit: int = 50) -> list[Offender]:
    """Devices with incidents in the window, the most hardware incidents first, then the most
    incidents (incidents, MTBI and rates over the window)."""
    now = timezone.now()
    since = now - timedelta(seconds=settings.OFFENDER_WINDOW_S)
    tallies = {serial: tally(errors, since.timestamp())
               for serial, errors in _rows("first_seen >= %s", [connection.ops.adapt_datetimefield_value(since)]).items()}
    top = heapq.nsmallest(limit, tallies, key=lambda s: (-tallies[s].hardware, -tallies[s].incidents, s))
    devices = {d.serial: d for d in Device.objects.filter(serial__in=top).select_related("host")}
    repairs = Counter(Action.objects.filter(serial__in=top, rule="driver_error").exclude(status="skipped").values_list("serial", flat=True))
    return [_offender(s, tallies[s], devices.get(s), repairs[s], now) for s in top]


def device_record(serial: str) -> Offender | None:
    """One device's record (its page), wherever it ran: its whole kept history."""
    errors = _rows("serial = %s", [serial]).get(serial)
    if not errors:
        return None
    now = timezone.now()
    device = Device.objects.filter(serial=serial).select_related("host").first()
    repairs = Action.objects.filter(serial=serial, rule="driver_error").exclude(status="skipped").count()
    return _offender(serial, tally(errors, now.timestamp() - settings.OFFENDER_WINDOW_S), device, repairs, now)
