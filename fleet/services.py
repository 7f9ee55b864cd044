"""The writers of the fleet: seeding the emulated fleet and polling it.

Celery tasks are thin wrappers over these functions; tests call them directly too.
"""

import logging
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from django.conf import settings
from django.db import transaction

from dashboard import push
from emulator import FleetConfig, fleet_layout
from fleet import samples, snapshots
from fleet.asicmon import HostMonitor
from fleet.health import assess_with_reasons
from fleet.models import Device, Host

log = logging.getLogger(__name__)


def fleet_config() -> FleetConfig:
    return FleetConfig(
        seed=settings.FLEET_SEED,
        hosts=settings.FLEET_HOSTS,
        devices_per_host=settings.FLEET_DEVICES_PER_HOST,
        types=tuple(settings.FLEET_TYPES),
    )


@dataclass(frozen=True)
class SeedResult:
    hosts_created: int
    devices_created: int
    devices_total: int


@transaction.atomic
def seed_fleet(config: FleetConfig | None = None) -> SeedResult:
    """Create the Host and Device rows of the emulated fleet; running it again adds nothing."""
    config = config or fleet_config()
    hosts_created = devices_created = 0
    for host_spec in fleet_layout(config):
        host, created = Host.objects.get_or_create(name=host_spec.name)
        hosts_created += created
        for spec in host_spec.devices:
            _, created = Device.objects.get_or_create(
                serial=spec.serial,
                defaults={
                    "host": host,
                    "device_type": spec.type,
                    "model": spec.model,
                    "index": spec.index,
                },
            )
            devices_created += created
    return SeedResult(hosts_created, devices_created, Device.objects.count())


# --- Polling -------------------------------------------------------------------------

_host_monitors: dict[str, HostMonitor] = {}


def host_monitor(host_name: str) -> HostMonitor:
    """The Asicmon monitor of a host, kept for the life of the worker process."""
    monitor = _host_monitors.get(host_name)
    if monitor is None:
        state_dir = Path(settings.EMULATOR_STATE_DIR)
        state_dir.mkdir(parents=True, exist_ok=True)
        monitor = HostMonitor.open(
            fleet_config(), host_name, state_dir=state_dir, probe_timeout=settings.PROBE_TIMEOUT
        )
        _host_monitors[host_name] = monitor
    return monitor


def current_cycle(now: float | None = None) -> float:
    """The start of the poll slot that `now` falls in: the key of a cycle's samples."""
    now = time.time() if now is None else now
    interval = settings.POLL_INTERVAL
    return (now // interval) * interval


def shards() -> range:
    return range(settings.POLL_SHARDS)


@dataclass(frozen=True)
class ShardPollResult:
    shard: int
    cycle: float
    devices: int
    samples: int
    seconds: float


def poll_shard(shard: int, cycle: float) -> ShardPollResult:
    """Poll every device of one shard of hosts through Asicmon, for one cycle.

    Writes the cycle's samples in one batch (a repeat of the same cycle adds nothing),
    stores the latest snapshots in Redis and publishes one message for the shard.
    """
    started = time.perf_counter()
    hosts = list(Host.objects.in_shard(shard, settings.POLL_SHARDS).values_list("id", "name"))
    devices = dict(
        Device.objects.filter(host_id__in=[host_id for host_id, _ in hosts]).values_list("serial", "id")
    )
    cycle_ts = datetime.fromtimestamp(cycle, tz=UTC)
    now = time.time()
    counter_ids = samples.counter_ids()
    polled: dict[int, dict] = {}
    rows: list[samples.SampleRow] = []
    for _, host_name in hosts:
        for serial, snapshot in host_monitor(host_name).poll().items():
            device_id = devices.get(serial)
            if device_id is None:
                continue  # a device the database does not know (yet): not ours to record
            assessment = assess_with_reasons(snapshot, now=now, poll_interval=settings.POLL_INTERVAL)
            snapshot["health"] = assessment.health.value
            snapshot["health_reasons"] = assessment.reasons
            polled[device_id] = snapshot
            rows.extend(samples.rows_from_snapshot(device_id, cycle_ts, snapshot, counter_ids))

    written = samples.write_samples(rows)
    snapshots.write_snapshots(cycle, polled)
    push.shard_polled(shard, cycle, [device_line(device_id, s) for device_id, s in polled.items()])
    result = ShardPollResult(shard, cycle, len(polled), written, time.perf_counter() - started)
    log.info(
        "shard %d cycle %.0f: %d devices, %d samples in %.1f ms",
        shard, cycle, result.devices, result.samples, result.seconds * 1000,
    )
    return result


def device_line(device_id: int, snapshot: dict) -> push.DeviceLine:
    return {
        "id": device_id,
        "health": snapshot.get("health", "unknown"),
        "reasons": snapshot.get("health_reasons", []),
        "driver_status": snapshot.get("driver_status"),
        "device_utilization": snapshot.get("device_utilization"),
        "temperature_c": snapshot.get("temperature_c"),
        "power_w": snapshot.get("power_w"),
        "memory_used_bytes": snapshot.get("memory_used_bytes"),
        "memory_total_bytes": snapshot.get("memory_total_bytes"),
        "sample_ts": snapshot.get("sample_ts"),
    }


def prune_samples(older_than_hours: int | None = None) -> int:
    from fleet.models import Sample

    hours = older_than_hours or settings.SAMPLE_RETENTION_HOURS
    cutoff = datetime.fromtimestamp(time.time() - hours * 3600, tz=UTC)
    deleted, _ = Sample.objects.filter(ts__lt=cutoff).delete()
    return deleted
