"""The readers of the fleet: what pages and the API show, in a fixed number of queries."""

import time
from collections import Counter, defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from fleet import samples, snapshots
from fleet.asicmon import CATALOGUE
from fleet.choices import Health
from fleet.health import Assessment
from fleet.health_service import current_health
from fleet.key_counters import key_counter_names
from fleet.models import Device, Sample


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
    devices = list(Device.objects.for_dashboard().matching(host=host, device_type=device_type))
    latest = snapshots.read_snapshots([d.id for d in devices])
    now = time.time()
    rows = [DeviceRow(d, latest.get(d.id), current_health(latest.get(d.id), now)) for d in devices]
    counts = Counter(row.health.value for row in rows)
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
    assessment = current_health(snapshot)
    return DeviceDetail(
        snapshot=snapshot,
        assessment=assessment,
        counters=counters,
        history=device_history(device, charted_counters(assessment), minutes),
    )


# The counters behind each health rule, graphed on a device page while the rule fires.
RULE_COUNTERS = {
    "cooling": ["temperature_c", "power_w"],
    "ecc": ["ecc_corrected_per_s", "ecc_uncorrected_total"],
    "pcie": ["pcie_link_width", "pcie_link_gen", "pcie_errors_per_s"],
    "memory_leak": ["memory_used_bytes"],
    "core_stuck": ["device_utilization", "power_w"],
    "throttle": ["clock_mhz", "temperature_c"],
}


def charted_counters(assessment: Assessment) -> list[str]:
    """The key counters, then those behind the reasons the device is unhealthy now."""
    names = key_counter_names()
    for finding in assessment.findings:
        names += [n for n in RULE_COUNTERS.get(finding.rule, []) if n not in names]
    return names


def device_activity(device: Device, limit: int = 20) -> tuple[list, list]:
    """The device's latest health events and actions (two queries)."""
    from fleet.models import Action, HealthEvent

    events = list(HealthEvent.objects.filter(device=device).order_by("-started_at", "-id")[:limit])
    actions = list(Action.objects.filter(device=device).select_related("user").order_by("-created_at", "-id")[:limit])
    return events, actions
