"""The readers of the fleet: what pages and the API show, in a fixed number of queries."""

import time
from collections import Counter as Tally
from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.conf import settings

from fleet import samples, snapshots
from fleet.asicmon import CATALOGUE
from fleet.choices import Health
from fleet.health import Assessment, assess_with_reasons
from fleet.models import Device, Sample

# The counters a fleet listing and a device page show first.
KEY_COUNTERS = ["device_utilization", "temperature_c", "power_w", "memory_used_bytes"]


@dataclass
class DeviceRow:
    device: Device
    snapshot: dict | None
    assessment: Assessment

    @property
    def health(self) -> Health:
        return self.assessment.health


@dataclass
class FleetOverview:
    rows: list[DeviceRow]
    health_counts: dict[str, int]
    hosts: int


def fleet_overview() -> FleetOverview:
    """Every device with its latest snapshot: one SQL query and one Redis call."""
    devices = list(Device.objects.for_dashboard())
    latest = snapshots.read_snapshots([d.id for d in devices])
    now = time.time()
    rows = [
        DeviceRow(d, latest.get(d.id), assess_with_reasons(latest.get(d.id), now=now, poll_interval=settings.POLL_INTERVAL))
        for d in devices
    ]
    counts = Tally(row.health.value for row in rows)
    return FleetOverview(
        rows=rows,
        health_counts={h.value: counts.get(h.value, 0) for h in Health},
        hosts=len({d.host_id for d in devices}),
    )


def device_history(device: Device, counters: list[str], minutes: int = 15) -> dict[str, list]:
    """Recent samples of a few counters of one device, in one query: name -> [(epoch, value)]."""
    ids = samples.counter_ids()
    wanted = {ids[name]: name for name in counters if name in ids}
    since = datetime.now(tz=UTC) - timedelta(minutes=minutes)
    history: dict[str, list] = defaultdict(list)
    rows = (
        Sample.objects.filter(device=device, counter_id__in=list(wanted), ts__gte=since)
        .order_by("ts")
        .values_list("counter_id", "ts", "value")
    )
    for counter_id, ts, value in rows:
        history[wanted[counter_id]].append((ts.timestamp(), value))
    return {name: history.get(name, []) for name in counters}


@dataclass
class DeviceDetail:
    snapshot: dict
    assessment: Assessment
    counters: list[dict]
    history: dict[str, list]


def device_detail(device: Device, minutes: int = 15) -> DeviceDetail:
    """A device page's data: latest snapshot and its health, every counter, recent history."""
    snapshot = snapshots.read_snapshot(device.id) or {}
    counters = [
        {"name": name, "value": snapshot[name], "unit": CATALOGUE[name].unit, "description": CATALOGUE[name].description}
        for name in sorted(snapshot)
        if name in CATALOGUE
    ]
    return DeviceDetail(
        snapshot=snapshot,
        assessment=assess_with_reasons(snapshot, now=time.time(), poll_interval=settings.POLL_INTERVAL),
        counters=counters,
        history=device_history(device, KEY_COUNTERS, minutes),
    )
