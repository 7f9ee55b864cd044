"""A 10,000-device fleet (1,250 hosts x 8): where a poll cycle's time goes, and ingestion.

    DATABASE_URL=postgres://… python benchmarks/bench_fleet10k.py [--hosts 1250] [--probe-hosts 60]

Prints, for the fleet size asked for:
- probe: the emulator and the Asicmon refresh per device (timed on --probe-hosts hosts and
  scaled), hence the CPU seconds one cycle of the whole fleet needs and how many worker
  processes keep up with a POLL_INTERVAL;
- write: one cycle's samples (every device, every series counter, the dcgm-exporter names
  of the GPUs) encoded and written to the time-series store as the poll does it
  (fleet.polling.poller.write_samples: one remote write per shard), wall time and the writer's own
  CPU time; then the device page's read of one device (fleet.tsdb.reads) and the fleet's p95
  temperature by type over the cycles written. benchmarks/bench_tsdb.py has the store's
  figures over an hour of the fleet (bytes per sample, ingest rate, reads over 30 days);
- push: the bytes of one cycle's fleet message, the whole fleet to every fleet page.

Runs on a throwaway database it creates and drops, and the store at TSDB_URL (a throwaway
VictoriaMetrics when none answers there) under a label of its own. Figures depend on the
machine and its load: say which when you quote them.
"""

import argparse
import contextlib
import json
import os
import tempfile
import time
import urllib.request
from pathlib import Path

from harness import (
    django_env,
    load_average,
    median,
    throwaway_database,
)


def setup(args) -> list:
    """Settings for the run, and the throwaway store started for it (if any)."""
    from dashboard.backing_services import resolve_tsdb

    state = tempfile.mkdtemp(prefix="asicmon-bench10k-")
    os.environ.update(
        FLEET_HOSTS=str(args.hosts), FLEET_DEVICES_PER_HOST="8", EMULATOR_STATE_DIR=state,
        REDIS_KEY_PREFIX="asicmon-bench10k", POLL_SHARDS="1", LOG_LEVEL="WARNING",
        TSDB_LABELS=f"asicmon_bench=fleet{os.getpid()}", TSDB_BUFFER_DIR=str(Path(state) / "spool"),
    )
    env = dict(os.environ)
    helpers = resolve_tsdb(env, Path(state) / "tsdb")
    os.environ.update({k: env[k] for k in ("TSDB_URL", "TSDB_WRITE_URL") if k in env})
    django_env()
    return helpers


def probe_figures(args) -> tuple[float, list[dict]]:
    """Seconds per device for emulator + refresh, and a sample of snapshots."""
    from emulator import fleet_layout
    from fleet.hosts import emulated_fleet

    names = [h.name for h in fleet_layout(emulated_fleet.fleet_config())][: args.probe_hosts]
    monitors = [emulated_fleet.host_monitor(n) for n in names]
    now = time.time()
    for m in monitors:
        m.poll(now - 5)  # warm: rates need a previous refresh
    per_cycle = []
    for cycle in range(3):
        t0 = time.perf_counter()
        snaps = [s for m in monitors for s in m.poll(now + 5 * cycle).values()]
        per_cycle.append(time.perf_counter() - t0)
    return median(per_cycle) / len(snaps), snaps


def fleet_keys(snaps: list[dict], devices: int) -> list[tuple]:
    """(series labels, snapshot) of `devices` devices, 8 a host, types in turn by host,
    cycling through real snapshots."""
    from django.conf import settings

    from fleet.tsdb.series import DeviceKey

    types = settings.FLEET_TYPES
    return [(DeviceKey(f"bench-{i // 8:05d}", i, f"BENCH-{i:06d}", types[(i // 8) % len(types)], "M", i % 8),
             snaps[i % len(snaps)]) for i in range(1, devices + 1)]


def ingestion(args, snaps) -> None:
    from django.conf import settings

    from fleet import tsdb
    from fleet.polling import poller
    from fleet.tsdb import reads
    from fleet.tsdb.series import selector

    devices = args.hosts * 8
    keyed = fleet_keys(snaps, devices)
    shards = [keyed[k::args.shards] for k in range(args.shards)]
    base = poller.current_cycle() - args.write_cycles * args.interval
    seconds, cpu, counts = [], [], []
    for i in range(args.write_cycles):
        cycle = base + i * args.interval
        t0, c0 = time.perf_counter(), time.process_time()
        results = [poller.write_samples(cycle, f"shard:{k}", part) for k, part in enumerate(shards)]
        seconds.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
        counts.append(sum(r.written for r in results))
        if any(r.buffered or r.rejected for r in results):
            print(f"  write: the store did not take cycle {i} ({results}): see {settings.TSDB_URL}")
            return
    n, mid = counts[0], median(seconds)
    print(f"  write one cycle to the store ({n:,} samples, {devices:,} devices, {args.shards} batches), median of "
          f"{args.write_cycles}, load average {load_average()}: {mid * 1000:.0f} ms, {n / mid:,.0f} samples/s; "
          f"writer CPU {median(cpu) * 1000:.0f} ms ({median(cpu) / devices * 1e6:.1f} µs/device)")
    with contextlib.suppress(OSError):  # VictoriaMetrics: what was just written, readable now
        urllib.request.urlopen(f"{settings.TSDB_URL}/internal/force_flush", timeout=60).close()
    time.sleep(1.1)
    client, end = tsdb.client(), base + args.write_cycles * args.interval
    names = {"device_utilization": "asicmon_device_utilization", "temperature_c": "asicmon_temperature_c",
             "power_w": "asicmon_power_w", "memory_used_bytes": "asicmon_memory_used_bytes"}
    t0 = time.perf_counter()
    raw = reads.raw_points(client, names, {"device": "42"}, end - 900, end, interval_s=args.interval)
    raw_ms = (time.perf_counter() - t0) * 1000
    t0 = time.perf_counter()
    quantile = reads.fleet_quantile(client, "asicmon_temperature_c", 0.95, base, end, args.interval)
    p95_ms = (time.perf_counter() - t0) * 1000
    print(f"    device page read, 4 key counters of one device over 15 min: {raw_ms:.1f} ms "
          f"({sum(map(len, raw.values()))} points); fleet p95 temperature by type over the {args.write_cycles} cycles: "
          f"{p95_ms:.0f} ms ({len(quantile)} types)")
    stored = client.query(f"count(count_over_time({selector('asicmon_temperature_c')}[1h]))", at=end)
    print(f"    devices with samples in the store: {int(stored[0].points[0][1]) if stored else 0:,} of {devices:,}")


def push_figures(args, snaps) -> None:
    from fleet import events

    devices = args.hosts * 8
    lines = [events.device_line(i, {**snaps[i % len(snaps)], "health": "ok", "health_reasons": []}) for i in range(devices)]
    size = len(json.dumps({"type": "fleet.polled", "cycle": 0.0, "devices": lines}))
    print(f"  push: one cycle's fleet message {size / 1e6:.2f} MB to every fleet-page socket "
          f"({size / devices:.0f} B/device)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hosts", type=int, default=1250)
    parser.add_argument("--probe-hosts", type=int, default=60, help="hosts actually probed (the rest scaled)")
    parser.add_argument("--write-cycles", type=int, default=5)
    parser.add_argument("--interval", type=float, default=5.0)
    parser.add_argument("--shards", type=int, default=2, help="batches a cycle (POLL_SHARDS)")
    args = parser.parse_args()
    helpers = setup(args)

    from dashboard.backing_services import stop

    try:
        with throwaway_database():
            devices = args.hosts * 8
            per_device, snaps = probe_figures(args)
            cycle_cpu = per_device * devices
            print(f"Asicmon fleet benchmark — {devices:,} devices ({args.hosts:,} hosts x 8), interval {args.interval:g} s")
            print(f"  probe (emulator + Asicmon refresh): {per_device * 1e6:.0f} µs/device, measured on {len(snaps)} devices "
                  f"→ {cycle_cpu:.1f} CPU-s per cycle of the fleet")
            print(f"    worker processes needed to keep up (probe only): {cycle_cpu / args.interval:.1f}; "
                  f"one process keeps up with {int(args.interval / per_device):,} devices")
            ingestion(args, snaps)
            push_figures(args, snaps)
    finally:
        stop(helpers)


if __name__ == "__main__":
    main()
