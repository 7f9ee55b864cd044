import time

import pytest

from fleet.hosts import emulated_fleet
from fleet.models import Device
from fleet.polling import poller


@pytest.fixture
def gpu_ladder_fleet(fleet_settings, clean_redis):
    """Four hosts of two GPU-like devices; hosts 0-1 serve one job, hosts 2-3 another.
    Short resets, and limits that a test lowers where it tests them."""
    s = fleet_settings
    s.FLEET_TYPES = ("gpu",)
    s.FLEET_HOSTS = 4
    s.FLEET_DEVICES_PER_HOST = 2
    s.POLL_SHARDS = 1
    s.POLL_INTERVAL = 1.0
    s.EMULATOR_REBOOT_S = 0.5
    s.LADDER_MAX_PER_WORKLOAD = 4
    s.LADDER_BREAKER_SHARE = 1.0
    s.LADDER_CHECK_TIMEOUT_S = 20.0
    s.REMEDIATION_PAUSE_CRITICAL = 100
    emulated_fleet.host_monitor.cache_clear()
    emulated_fleet.seed_fleet()
    return list(Device.objects.for_dashboard())


def poll_until(predicate, *, polls: int = 20, pause: float = 0.4, within_s: float = 60.0):
    """Polls the fleet (one shard) until ``predicate()`` is true, at least ``polls`` times
    unless it is true sooner, and on past them (a busy machine) until ``within_s``; returns
    its last value."""
    deadline = time.monotonic() + within_s
    done = 0
    while True:
        poller.poll_shard(0, poller.current_cycle())
        done += 1
        value = predicate()
        if value or (done >= polls and (polls < 5 or time.monotonic() > deadline)):
            return value
        time.sleep(pause)


def inject(device: Device, fault: str) -> None:
    emulated_fleet.host_monitor(device.host.name).inject_fault(device.serial, fault)
