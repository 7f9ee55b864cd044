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
    rows: list[DeviceRow]  # the devices that pass every filter
    health_counts: dict[str, int]  # by health, over the devices that pass the other filters
    hosts: int
    devices: int  # before the health filter
    types: list[str]  # every device type in the fleet, for the filter
    host_names: list[str]


def fleet_overview(*, host: str = "", device_type: str = "", health: str = "") -> FleetOverview:
    """Devices with their latest snapshots and health, filtered: two SQL queries, one Redis call.

    Host and type filter in SQL; health filters after assessment, since it lives in Redis.
    """
    devices = Device.objects.for_dashboard()
    if host:
        devices = devices.filter(host__name=host)
    if device_type:
        devices = devices.filter(device_type=device_type)
    devices = list(devices)
    latest = snapshots.read_snapshots([d.id for d in devices])
    now = time.time()
    rows = [
        DeviceRow(d, latest.get(d.id), assess_with_reasons(latest.get(d.id), now=now, poll_interval=settings.POLL_INTERVAL))
        for d in devices
    ]
    counts = Tally(row.health.value for row in rows)
    choices = Device.objects.order_by().values_list("device_type", "host__name").distinct()
    return FleetOverview(
        rows=[row for row in rows if not health or row.health.value == health],
        health_counts={h.value: counts.get(h.value, 0) for h in Health},
        hosts=len({d.host_id for d in devices}),
        devices=len(devices),
        types=sorted({t for t, _ in choices}),
        host_names=sorted({h for _, h in choices}),
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
