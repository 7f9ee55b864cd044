"""The emulated fleet's configuration and its per-host Asicmon monitors, cached per process.

A module of its own so the pollers, the control actions and the trace captures share one
monitor per host without importing each other.
"""

import functools
from pathlib import Path

from django.conf import settings

from emulator import FleetConfig
from fleet.emulated import HostMonitor


def fleet_config() -> FleetConfig:
    return FleetConfig(
        seed=settings.FLEET_SEED,
        hosts=settings.FLEET_HOSTS,
        devices_per_host=settings.FLEET_DEVICES_PER_HOST,
        types=tuple(settings.FLEET_TYPES),
        reboot_s=settings.EMULATOR_REBOOT_S,
    )


@functools.cache
def host_monitor(host_name: str) -> HostMonitor:
    """The Asicmon monitor of a host, kept for the life of the worker process
    (``host_monitor.cache_clear()`` forgets them all, e.g. after the fleet settings change)."""
    state_dir = Path(settings.EMULATOR_STATE_DIR)
    state_dir.mkdir(parents=True, exist_ok=True)
    return HostMonitor.open(
        fleet_config(), host_name, state_dir=state_dir, probe_timeout=settings.PROBE_TIMEOUT
    )
