"""`bench_fleet_capacity.py breakdown`: where a poll cycle's time goes, per device.

Each shard is polled the way `fleet.polling.poller.poll_shard` polls it, but one phase after
another (hosts one by one), so that the process CPU time of each phase is its own: state
files, emulator physics, the monitors' refresh (driver reads + compiled Asimov code + stats
cache, and the hand-off to probe threads), then health rules, the shard's samples encoded
for the time-series store and written to it, snapshots, remediation and the push. The split of a refresh between the
driver and the monitor comes from profiling inline refreshes of a sample of hosts.
Then the real `poll_shard` (hosts side by side) is timed for comparison.
"""

from __future__ import annotations

import cProfile
import os
import pstats
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from harness import django_env, throwaway_database

REDIS_PREFIX = "asicmon-bench-capacity"
_helpers: list = []  # a throwaway store, when none answers at TSDB_URL


class Clock:
    """Adds up process CPU seconds and wall seconds per phase."""

    def __init__(self) -> None:
        self.cpu: dict[str, float] = defaultdict(float)
        self.wall: dict[str, float] = defaultdict(float)

    def time(self, phase: str, step):
        c0, w0 = time.process_time(), time.perf_counter()
        result = step()
        self.cpu[phase] += time.process_time() - c0
        self.wall[phase] += time.perf_counter() - w0
        return result


def _setup() -> None:
    from dashboard.backing_services import resolve_tsdb

    os.environ.update(
        EMULATOR_STATE_DIR=tempfile.mkdtemp(prefix="asicmon-capacity-"),
        REDIS_KEY_PREFIX=REDIS_PREFIX,
        LOG_LEVEL="WARNING",
        TSDB_LABELS="asicmon_bench=capacity",
        TSDB_BUFFER_DIR=tempfile.mkdtemp(prefix="asicmon-capacity-spool-"),
    )
    env = dict(os.environ)
    _helpers.extend(resolve_tsdb(env, Path(tempfile.mkdtemp(prefix="asicmon-capacity-tsdb-"))))
    os.environ.update({k: env[k] for k in ("TSDB_URL", "TSDB_WRITE_URL") if k in env})
    django_env()


def _poll_host_phases(clock: Clock, monitor, now: float) -> dict:
    """HostMonitor.poll, phase by phase (the same calls, in the same order)."""
    from fleet.asicmon.monitor import refresh_together

    host = monitor.host
    with host.locked():
        clock.time("state files", lambda: monitor.load_state(now))
        clock.time("emulator physics", lambda: host.advance(now))
        clock.time("monitor refresh", lambda: refresh_together(monitor.monitors(), now, monitor.probe_timeout))
        clock.time("state files", monitor.save_state)
    return clock.time("snapshots (copy)", monitor.snapshots)


def _poll_shard_phases(clock: Clock, shard: int, cycle: float) -> int:
    from django.conf import settings

    from fleet import events, tsdb
    from fleet.health import assessing, remediation
    from fleet.health import index as health_index
    from fleet.hosts import emulated_fleet
    from fleet.models import Host
    from fleet.polling import poller, snapshots
    from fleet.tsdb.series import DeviceKey
    from fleet.tsdb.writes import Encoder

    hosts = clock.time("database reads", lambda: list(
        Host.objects.emulated().in_shard(shard, settings.POLL_SHARDS).values_list("id", "name")))
    rows = clock.time("database reads", lambda: poller._devices_of(hosts))
    devices = {row[0]: row for row in rows}
    kinds = {device_id: (device_type, state) for _, device_id, device_type, state, _, _ in rows}
    now = cycle  # each host's emulator moves on by exactly one interval, whatever the fleet size
    polled, keyed = {}, []
    for _, name in hosts:
        for serial, snap in _poll_host_phases(clock, emulated_fleet.host_monitor(name), now).items():
            _, device_id, device_type, _, model, index = devices[serial]
            polled[device_id] = snap
            keyed.append((DeviceKey(name, device_id, serial, device_type, model, index), snap))
    clock.time("health rules", lambda: assessing.assess_polled(polled, kinds, now))
    encoder = _ENCODER.setdefault("poll", Encoder(dcgm=settings.TSDB_DCGM_SERIES))
    batches = clock.time("samples encode", lambda: encoder.batches(cycle, f"shard:{shard}", keyed, settings.TSDB_LABELS))
    clock.time("samples write", lambda: tsdb.writer().write(batches))
    clock.time("snapshots (Redis)", lambda: snapshots.write_snapshots(cycle, polled))
    clock.time("remediation", lambda: remediation.after_poll(polled))
    clock.time("health index", lambda: health_index.record(polled, cycle))
    clock.time("push", lambda: events.shard_polled(shard, cycle, list(polled)))
    return len(polled)


_ENCODER: dict = {}  # one encoder for the run, as a worker keeps one (its series prefixes)


DRIVER_FILES = ("emulator/devices/drivers/", "emulator/devices/physics.py")


def _driver_share(names: list[str], now: float) -> tuple[float, float]:
    """(share of an inline refresh spent in the emulated drivers, CPU s per inline refresh),
    from refreshing the monitors of `names` (in-memory copies) without probe threads."""
    from fleet.hosts.emulated_fleet import fleet_config
    from fleet.hosts.emulated_monitors import HostMonitor

    hosts = [HostMonitor.open(fleet_config(), name) for name in names]
    for h in hosts:
        h.poll(now - 5)
    monitors = [m for h in hosts for m in h.monitors()]
    c0 = time.process_time()
    for m in monitors:
        m.refresh(now)
    per_refresh = (time.process_time() - c0) / len(monitors)
    profile = cProfile.Profile()
    profile.enable()
    for m in monitors:
        m.refresh(now + 5)
    profile.disable()
    driver = total = 0.0
    for (filename, _, _), (_, _, tottime, _, _) in pstats.Stats(profile).stats.items():
        total += tottime
        if any(part in filename for part in DRIVER_FILES):
            driver += tottime
    return driver / total, per_refresh


def _seed(devices: int, shards: int) -> int:
    from django.conf import settings

    from fleet.hosts import emulated_fleet
    from fleet.models import Device, Host

    Device.objects.all().delete()
    Host.objects.all().delete()
    settings.FLEET_HOSTS = max(1, devices // settings.FLEET_DEVICES_PER_HOST)
    settings.POLL_SHARDS = shards
    emulated_fleet.host_monitor.cache_clear()
    emulated_fleet.seed_fleet()
    return Device.objects.count()


def _measure(devices: int, cycles: int, shards: int) -> None:
    from django.conf import settings

    from fleet.polling import poller

    count = _seed(devices, shards)
    interval = settings.POLL_INTERVAL
    base = poller.current_cycle() - (cycles + 1) * interval
    clock = Clock()
    for shard in poller.shards():  # warm-up: monitors opened, states created, first readings
        _poll_shard_phases(Clock(), shard, base)
    for i in range(1, cycles + 1):
        for shard in poller.shards():
            _poll_shard_phases(clock, shard, base + i * interval)
    polled = count * cycles
    share, inline_s = _driver_share([f"{h.name}" for h in _sample_hosts()], time.time())
    real_cpu, real_wall = _real_polls(base + (cycles + 1) * interval, cycles)
    _report(count, clock, polled, share, inline_s, real_cpu / count, real_wall / count, interval)


def _sample_hosts(n: int = 30):
    from emulator import fleet_layout
    from fleet.hosts.emulated_fleet import fleet_config

    return fleet_layout(fleet_config())[:n]


def _real_polls(first_cycle: float, cycles: int) -> tuple[float, float]:
    """CPU and wall seconds of one whole-fleet cycle through the real poll_shard (median).
    Its emulator follows the wall clock: where one process takes longer than an interval
    over the fleet, each device's physics covers that longer gap (more steps)."""
    from django.conf import settings

    from fleet.polling import poller

    for shard in poller.shards():  # catch up with the wall clock first
        poller.poll_shard(shard, first_cycle)
    cpu, wall = [], []
    for i in range(1, cycles + 1):
        time.sleep(settings.POLL_INTERVAL / 5)
        c0, w0 = time.process_time(), time.perf_counter()
        for shard in poller.shards():
            poller.poll_shard(shard, first_cycle + i * settings.POLL_INTERVAL)
        cpu.append(time.process_time() - c0)
        wall.append(time.perf_counter() - w0)
    return sorted(cpu)[len(cpu) // 2], sorted(wall)[len(wall) // 2]


PHASES = (
    "emulator physics", "driver reads", "monitor refresh", "probe threads hand-off", "state files",
    "snapshots (copy)", "database reads", "health rules", "samples encode", "samples write",
    "snapshots (Redis)", "remediation", "push",
)


def _report(count, clock, polled, share, inline_s, real_cpu, real_wall, interval) -> None:
    cpu = {k: v / polled for k, v in clock.cpu.items()}
    wall = {k: v / polled for k, v in clock.wall.items()}
    together = cpu.pop("monitor refresh")
    inline = min(inline_s, together)
    cpu["driver reads"] = inline * share
    cpu["monitor refresh"] = inline * (1 - share)
    cpu["probe threads hand-off"] = together - inline
    wall_refresh = wall.pop("monitor refresh")
    load = os.getloadavg()
    print(f"\n{count:,} devices, {count // 8:,} hosts — per device per cycle (load {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}):")
    print(f"  {'phase':26s} {'CPU µs':>8s} {'wall µs':>8s}")
    for phase in PHASES:
        w = wall.get(phase)
        w_text = f"{w * 1e6:8.0f}" if w is not None else ("  (" + f"{wall_refresh * 1e6:.0f} all three)" if phase == "driver reads" else "")
        print(f"  {phase:26s} {cpu.get(phase, 0.0) * 1e6:8.0f} {w_text}")
    total = sum(cpu.values())
    print(f"  {'total, phase by phase':26s} {total * 1e6:8.0f} {sum(wall.values()) * 1e6 + wall_refresh * 1e6:8.0f}")
    print(f"  {'real poll_shard (threads)':26s} {real_cpu * 1e6:8.0f} {real_wall * 1e6:8.0f}"
          f"   (hosts side by side; gaps of {max(interval, real_wall * count + interval / 5):.0f} s for the emulator)")
    print(f"  one process keeps up with about {int(interval / max(real_cpu, real_wall)):,} devices "
          f"at {interval:g} s (CPU-bound estimate: {int(interval / real_cpu):,})")


def breakdown(sizes: list[int], cycles: int, shards: int) -> None:
    _setup()
    from django.db import connection

    try:
        with throwaway_database():
            try:
                print(f"Poll-cycle breakdown on {connection.vendor}, {cycles} cycles per size after a warm-up")
                for devices in sizes:
                    _measure(devices, cycles, shards)
            finally:
                from fleet.redis import get_redis

                client = get_redis()
                for name in client.scan_iter(match=f"{REDIS_PREFIX}*", count=1000):
                    client.delete(name)
    finally:
        from dashboard.backing_services import stop

        stop(_helpers)
