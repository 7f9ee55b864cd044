"""The emulated fleet of this deployment: its configuration (from the settings), its Host
and Device rows (`seed_fleet`), and one Asicmon `HostMonitor` per host, cached per process.

A module of its own so the pollers, the control actions and the trace captures share one
monitor per host without importing each other.
"""

import functools
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.db import transaction

from emulator import FleetConfig, fleet_layout
from emulator.devices.driver_errors import workload_label
from emulator.state_store import FileStateStore, RedisStateStore, StateStore
from fleet.hosts.emulated_monitors import HostMonitor
from fleet.models import Device, Host
from fleet.redis import get_redis, key


def fleet_config() -> FleetConfig:
    return FleetConfig(
        seed=settings.FLEET_SEED,
        hosts=settings.FLEET_HOSTS,
        devices_per_host=settings.FLEET_DEVICES_PER_HOST,
        types=tuple(settings.FLEET_TYPES),
        reboot_s=settings.EMULATOR_REBOOT_S,
    )


def state_store() -> StateStore:
    """Where the emulated hosts' state is kept, as EMULATOR_STATE says: files under
    EMULATOR_STATE_DIR, or the stack's Redis (machines that share no disk)."""
    if settings.EMULATOR_STATE == "redis":
        return _redis_store(key("emulator"))
    state_dir = Path(settings.EMULATOR_STATE_DIR)
    state_dir.mkdir(parents=True, exist_ok=True)
    return FileStateStore(state_dir)


@functools.cache
def _redis_store(prefix: str) -> RedisStateStore:
    return RedisStateStore(get_redis(), prefix)  # one per process: one thread renews its locks


@functools.cache
def host_monitor(host_name: str) -> HostMonitor:
    """The Asicmon monitor of a host, kept for the life of the worker process
    (``host_monitor.cache_clear()`` forgets them all, e.g. after the fleet settings change)."""
    return HostMonitor.open(
        fleet_config(), host_name, store=state_store(), probe_timeout=settings.PROBE_TIMEOUT
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
                    "workload": workload_label(spec.type, host_spec.name),
                },
            )
            devices_created += created
    return SeedResult(hosts_created, devices_created, Device.objects.count())
