"""What the fleet knew about a device while a job ran on it: the "why" of a straggler.

:func:`device_health` is the one place that reads the fleet for a capture window: the
device's health events that overlapped it, the statistics of its samples in it
(temperature, clocks, PCIe link, ECC errors, power; from the time-series store through
``fleet.reading.history.stats``) and the monitor's snapshots taken when the capture started and
ended (they carry the throttle reasons and the link status, which are states, not series).
When the store does not answer, the statistics are missing and ``series_unavailable`` says
why; the reasons then come from the events and snapshots alone, and say so.

The store makes a sample readable a moment after the poll wrote it, so right after a short
capture the window's last polls may not be there yet: :func:`device_health` waits (at most
``JOB_HEALTH_WAIT_S``) until the store holds the window's last poll, and when it still does not,
says so (``series_complete`` False). Every fact a snapshot carries (clocks, PCIe link, ECC
rate, temperature) then comes from the capture's own snapshots, and the job's reasons are
computed again once the series arrive (traces/jobs/results.py: ``refresh_health``).

:func:`health_reasons` turns those facts into the reasons a person reads, most telling
first; it is a pure function of the facts (and the device's peers in the job, for the
software version).
"""

from __future__ import annotations

import time
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db.models import Q

from fleet.models import Device, HealthEvent
from fleet.polling import snapshots
from fleet.reading import history

SERIES = ("temperature_c", "clock_mhz", "clock_max_mhz", "pcie_link_gen", "pcie_link_width",
          "ecc_corrected_per_s", "power_w", "device_utilization")
SNAPSHOT_KEYS = ("temperature_c", "temperature_limit_c", "clock_mhz", "clock_max_mhz", "throttle_reasons",
                 "pcie_link_gen", "pcie_link_width", "pcie_link_status", "ecc_corrected_per_s", "power_w",
                 "driver_status", "firmware_version")
#: Samples taken this long before the window still describe it (a poll interval or two).
LEAD = timedelta(seconds=30)
THROTTLED_BELOW = 0.9  # of the maximum clock
ECC_STORM_PER_S = 10.0


def snapshot_facts(device_id: int) -> dict[str, Any]:
    """The parts of the device's latest monitor snapshot that explain a slow device."""
    snap = snapshots.read_snapshot(device_id) or {}
    return {k: snap[k] for k in SNAPSHOT_KEYS if k in snap}


def last_poll_due(device_id: int, since: datetime, until: datetime) -> float | None:
    """The epoch of the latest poll of the device that the store should hold for [since -
    LEAD, until]: the device's latest poll when it fell in the window, the window's last
    poll interval when the device was polled after it, None when no poll fell in it. A poll
    is known by its cycle: the poller stamps the cycle's samples in the store with the cycle's
    slot, a little before the device's refresh in it (``sample_ts``)."""
    snap = snapshots.read_snapshot(device_id) or {}
    polled = snap.get("cycle") or snap.get("sample_ts")
    if not polled:
        return None
    start, end = (since - LEAD).timestamp(), until.timestamp()
    if polled < start:
        return None
    return min(polled, end - settings.POLL_INTERVAL)


def newest_stored(device_id: int, since: datetime, until: datetime) -> float | None:
    """The epoch of the newest sample the store holds of the device in [since - LEAD, until]."""
    found = history.read(device_id, list(SERIES), since - LEAD, until, limit=1)
    stamps = [points[-1][0] for points in found.values() if points]
    return max(stamps) if stamps else None


def wait_for_window(device_id: int, since: datetime, until: datetime, wait_s: float) -> bool:
    """Whether the store holds the window's last poll, waiting up to ``wait_s`` for it
    (raises history.TsdbError when the store does not answer)."""
    due = last_poll_due(device_id, since, until)
    if due is None:
        return True
    deadline = time.monotonic() + wait_s
    while True:
        newest = newest_stored(device_id, since, until)
        if newest is not None and newest >= due - 0.001:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(min(0.25, max(0.0, deadline - time.monotonic())))


def device_health(device: Device, since: datetime, until: datetime, at_capture: dict | None = None,
                  *, wait_s: float | None = None) -> dict[str, Any]:
    """The fleet's facts about ``device`` in [since, until] (see the module's notes).
    ``at_capture``: snapshots the capture took (``{"start": {...}, "end": {...}}``);
    ``wait_s``: how long to wait for the store to hold the window (JOB_HEALTH_WAIT_S)."""
    events = HealthEvent.objects.filter(device=device, started_at__lte=until).filter(
        Q(ended_at__isnull=True) | Q(ended_at__gte=since - LEAD)
    ).order_by("started_at")[:20]
    wait_s = settings.JOB_HEALTH_WAIT_S if wait_s is None else wait_s
    try:
        complete = wait_for_window(device.pk, since, until, wait_s)
        stats, unavailable = history.stats(device.pk, list(SERIES), since - LEAD, until), None
    except history.TsdbError as exc:
        complete, stats, unavailable = False, {}, history.unavailable(exc)
    return {
        "device": device.serial,
        "device_id": device.pk,
        "host": device.host.name,
        "since": since.isoformat(),
        "until": until.isoformat(),
        "events": [{"rule": e.rule, "level": e.level, "reason": e.reason, "started_at": e.started_at.isoformat(),
                    "ended_at": e.ended_at.isoformat() if e.ended_at else None} for e in events],
        "series": stats,
        "series_complete": complete,
        "series_unavailable": unavailable,
        "snapshots": at_capture or {},
    }


def _snap(facts: dict, key: str):
    for moment in ("end", "start"):
        value = (facts.get("snapshots") or {}).get(moment, {}).get(key)
        if value is not None:
            return value
    return None


def _fact(facts: dict, key: str) -> dict[str, float] | None:
    """The statistics of ``key`` in the window: the store's samples and the capture's
    snapshots together (a snapshot is a poll of the window too, and the store may not hold
    the latest polls yet)."""
    found = (facts.get("series") or {}).get(key)
    values = [v for moment in ("start", "end")
              if isinstance(v := (facts.get("snapshots") or {}).get(moment, {}).get(key), int | float)
              and not isinstance(v, bool)]
    if not values:
        return found or None
    n = len(values)
    lo, hi, total = min(values), max(values), sum(values)
    if found:
        lo, hi = min(lo, found["min"]), max(hi, found["max"])
        total += found["mean"] * found["n"]
        n += found["n"]
    return {"min": lo, "mean": total / n, "max": hi, "n": n}


def health_reasons(facts: dict[str, Any], *, sw_version: str = "", peer_versions: list[str] = ()) -> list[dict[str, Any]]:
    """Why the device may have been slow, from the fleet's facts: ``[{"kind", "text"}]``,
    the most telling first; empty when the fleet saw nothing wrong."""
    out = []
    clock, top = _fact(facts, "clock_mhz"), _fact(facts, "clock_max_mhz")
    throttle = _snap(facts, "throttle_reasons")
    if clock and top and top["max"] and clock["min"] < THROTTLED_BELOW * top["max"]:
        temp = _fact(facts, "temperature_c")
        text = f"clock down to {clock['min']:.0f} of {top['max']:.0f} MHz ({clock['min'] / top['max']:.0%})"
        if temp:
            text += f" at up to {temp['max']:.0f} °C"
        if throttle and throttle not in ("none", "idle"):
            text += f"; throttle reasons: {throttle}"
        out.append({"kind": "throttled", "text": "Throttled: " + text})
    elif throttle and throttle not in ("none", "idle"):
        out.append({"kind": "throttled", "text": f"Throttled: throttle reasons {throttle}"})
    gen, width = _fact(facts, "pcie_link_gen"), _fact(facts, "pcie_link_width")
    status = _snap(facts, "pcie_link_status")
    if status == "degraded" or (gen and width and (gen["min"] < gen["max"] or width["min"] < width["max"])):
        g = f"gen {gen['min']:.0f}" if gen else "gen ?"
        w = f"x{width['min']:.0f}" if width else "x?"
        out.append({"kind": "pcie", "text": f"PCIe link degraded: trained at {g} {w}"})
    ecc = _fact(facts, "ecc_corrected_per_s")
    if ecc and ecc["max"] >= ECC_STORM_PER_S:
        out.append({"kind": "ecc", "text": f"ECC storm: up to {ecc['max']:.0f} corrected memory errors/s"})
    others = sorted({v for v in peer_versions if v and v != sw_version})
    if sw_version and others and all(v != sw_version for v in peer_versions if v):
        out.append({"kind": "software", "text": f"Software {sw_version}; the other ranks run {', '.join(others)}"})
    for e in facts.get("events", []):
        out.append({"kind": "health_event", "text": f"Health event ({e['rule']}, {e['level']}): {e['reason']}",
                    "started_at": e["started_at"]})
    if facts.get("series_unavailable"):
        out.append({"kind": "history_unavailable",
                    "text": f"{facts['series_unavailable']} These reasons come from the health events and snapshots only."})
    elif facts.get("series_complete") is False:
        out.append({"kind": "history_pending",
                    "text": "The time-series store did not yet hold the capture window's last poll: these reasons come "
                            "from the capture's snapshots and the health events, and are computed again when it does."})
    return out
