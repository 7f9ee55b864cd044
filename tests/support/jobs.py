"""Helpers of the job tests: a fleet of GPU-like devices, a job that has been running on some
of them for a while (with a fault on one), and the fleet polled around it."""

from __future__ import annotations

import time

#: 2 hosts x 4 GPU-like devices (the gpu_fleet fixture); seed 11 puts software 2.0 on all but
#: host-00's slot 1 (1.5).
GPU_FLEET = {"FLEET_SEED": 11, "FLEET_HOSTS": 2, "FLEET_DEVICES_PER_HOST": 4, "FLEET_TYPES": ("gpu",)}
RUNNING_S = 900  # how long the job has run on its devices when a test captures it


def same_software(devices, count: int, version: str = "2.0"):
    """``count`` devices on software ``version``, from both hosts in turn."""
    from emulator.config import find_host
    from fleet.hosts.emulated_fleet import fleet_config

    cfg = fleet_config()
    ours = [d for d in devices if find_host(cfg, d.host.name).device(d.serial).sw_version == version]
    by_host = [[d for d in ours if d.host.name == h] for h in sorted({d.host.name for d in ours})]
    picked = [d for pair in zip(*by_host) for d in pair][:count]
    assert len(picked) == count, "the fleet has too few devices on that version"
    return picked


def running_job(devices, fault: str | None = None, victim=None, running_s: float = RUNNING_S) -> float:
    """Make the devices' emulated state that of a job running on them for ``running_s``
    (``fault`` injected on ``victim`` when it started), then poll the fleet twice; returns now.

    The fleet's automation is paused first: the polls would otherwise repair the fault they
    see (an ECC storm's uncorrectable errors get its device rebooted, which ends the storm),
    and the job the test then captures would have nothing left to find. CI met that once.
    Remediation has tests of its own."""
    from fleet.health.remediation import set_paused
    from fleet.hosts.emulated_fleet import host_monitor
    from fleet.polling import poller

    set_paused(True, reason="a test's job runs on these devices with its fault: nothing repairs it")
    now = time.time()
    for name in {d.host.name for d in devices}:
        host = host_monitor(name).host
        with host.locked():
            host.sync(now - running_s)
            for d in devices:
                if d.host.name == name:
                    host.occupy(d.serial, now + 600)
            if victim is not None and victim.host.name == name:
                host.inject_fault(victim.serial, fault)
            host.advance(now - 2)
            host.save()
    for cycle in (now - 2, now):
        for shard in poller.shards():
            poller.poll_shard(shard, cycle)
    return now
