"""The readers of the fleet: what pages and the API show, in a fixed number of queries."""

import time
from collections import Counter as Tally
from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.conf import settings

from fleet import samples, snapshots
from fleet.choices import Health
from fleet.health import assess
from fleet.models import Device, Sample

# The counters a fleet listing and a device page show first.
KEY_COUNTERS = ["device_utilization", "temperature_c", "power_w", "memory_used_bytes"]


@dataclass
class DeviceRow:
    device: Device
    snapshot: dict | None
    health: Health


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
        DeviceRow(d, latest.get(d.id), assess(latest.get(d.id), now=now, poll_interval=settings.POLL_INTERVAL))
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
