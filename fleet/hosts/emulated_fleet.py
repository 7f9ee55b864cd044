"""The emulated fleet of this deployment: its configuration (from the settings), its Host
and Device rows (`seed_fleet`), and one Asicmon `HostMonitor` per host, cached per process.

A module of its own so the pollers, the control actions and the trace captures share one
monitor per host without importing each other.
"""

import functools
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.db import IntegrityError, transaction

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


def seed_fleet(config: FleetConfig | None = None) -> SeedResult:
    """Create the Host and Device rows of the emulated fleet; running it again adds nothing.

    In a few queries (the rows there, then the missing ones in one insert each: a test seeds
    a fleet for every test); where another process seeds at the same moment and an insert
    meets its rows, row by row as get_or_create does, which counts only what it created."""
    layout = list(fleet_layout(config or fleet_config()))
    try:
        with transaction.atomic():
            return _seed_in_bulk(layout)
    except IntegrityError:
        return _seed_row_by_row(layout)


def _seed_in_bulk(layout) -> SeedResult:
    names = [host_spec.name for host_spec in layout]
    hosts = {host.name: host for host in _in_chunks(Host.objects, "name", names)}
    new_hosts = [Host(name=name) for name in names if name not in hosts]
    if new_hosts:
        Host.objects.bulk_create(new_hosts, batch_size=_CHUNK)
        hosts = {host.name: host for host in _in_chunks(Host.objects, "name", names)}
    serials = [spec.serial for host_spec in layout for spec in host_spec.devices]
    there = {device.serial for device in _in_chunks(Device.objects.only("serial"), "serial", serials)}
    new_devices = [
        Device(serial=spec.serial, host=hosts[host_spec.name], device_type=spec.type, model=spec.model,
               index=spec.index, workload=workload_label(spec.type, host_spec.name))
        for host_spec in layout for spec in host_spec.devices if spec.serial not in there
    ]
    Device.objects.bulk_create(new_devices, batch_size=_CHUNK)
    return SeedResult(len(new_hosts), len(new_devices), Device.objects.count())


_CHUNK = 2000  # rows a query names or inserts (PostgreSQL takes at most 65,535 parameters a query)


def _in_chunks(rows, field: str, values: list[str]):
    """The rows whose ``field`` is one of ``values``, in queries of _CHUNK values (a fleet of
    10,000 devices or more, as the benchmarks seed)."""
    for at in range(0, len(values), _CHUNK):
        yield from rows.filter(**{f"{field}__in": values[at:at + _CHUNK]})


@transaction.atomic
def _seed_row_by_row(layout) -> SeedResult:
    hosts_created = devices_created = 0
    for host_spec in layout:
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
