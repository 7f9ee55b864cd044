"""A 10,000-device fleet (1,250 hosts x 8): where a poll cycle's time goes, and its write.

    DATABASE_URL=postgres://… python benchmarks/bench_fleet10k.py [--hosts 1250] [--probe-hosts 60]

Prints, for the fleet size asked for:
- probe: the emulator and the Asicmon refresh per device (timed on --probe-hosts hosts and
  scaled), hence the CPU seconds one cycle of the whole fleet needs and how many worker
  processes keep up with a POLL_INTERVAL;
- write: one cycle's samples (every device, every series counter) encoded as the poll sends
  them to the time-series store (the store's figures: benchmarks/bench_tsdb.py);
- push: the bytes of one cycle's fleet message, the whole fleet to every fleet page.

Runs on a throwaway database it creates and drops.
Figures depend on the machine and its load: say which when you quote them.
"""

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def setup(args) -> None:
    state = tempfile.mkdtemp(prefix="asicmon-bench10k-")
    os.environ.update(
        FLEET_HOSTS=str(args.hosts), FLEET_DEVICES_PER_HOST="8", EMULATOR_STATE_DIR=state,
        REDIS_KEY_PREFIX="asicmon-bench10k", POLL_SHARDS="1", LOG_LEVEL="WARNING",
    )
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dashboard.settings")
    import django

    django.setup()


def probe_figures(args) -> tuple[float, list[dict]]:
    """Seconds per device for emulator + refresh, and a sample of snapshots."""
    from emulator import fleet_layout
    from fleet import emulated_fleet

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
    return statistics.median(per_cycle) / len(snaps), snaps


def write_figures(args, snaps) -> None:
    """One cycle's samples of the whole fleet encoded for the store, as a poll sends them
    (the store's own figures, sending included: benchmarks/bench_tsdb.py)."""
    from fleet.tsdb.series import DeviceKey
    from fleet.tsdb.writes import Encoder

    devices = args.hosts * 8
    keyed = [(DeviceKey(f"host-{d // 8:04d}", d + 1, f"SER-{d + 1:05d}", ("video", "inference", "gpu")[d % 3], "M", d % 8),
              snaps[d % len(snaps)]) for d in range(devices)]
    encoder = Encoder()
    encoder.batches(time.time(), "bench", keyed)  # the series' bytes, made once per device
    cpu, samples, size = [], 0, 0
    for i in range(args.write_cycles):
        c0 = time.process_time()
        batches = encoder.batches(time.time() + 5 * (i + 1), "bench", keyed)
        cpu.append(time.process_time() - c0)
        samples = sum(b.samples for b in batches)
        size = sum(len(b.body) for b in batches)
    per_cycle = statistics.median(cpu)
    print(f"  write: one cycle's {samples:,} samples as remote-write requests: {per_cycle * 1000:.0f} ms CPU "
          f"({per_cycle / devices * 1e6:.1f} µs/device), {size / 2**20:.1f} MiB compressed in {len(batches)} requests")


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
    args = parser.parse_args()
    setup(args)
    from django.test.utils import setup_databases, teardown_databases

    old = setup_databases(verbosity=0, interactive=False)
    try:
        devices = args.hosts * 8
        per_device, snaps = probe_figures(args)
        cycle_cpu = per_device * devices
        print(f"Asicmon fleet benchmark — {devices:,} devices ({args.hosts:,} hosts x 8), interval {args.interval:g} s")
        print(f"  probe (emulator + Asicmon refresh): {per_device * 1e6:.0f} µs/device, measured on {len(snaps)} devices "
              f"→ {cycle_cpu:.1f} CPU-s per cycle of the fleet")
        print(f"    worker processes needed to keep up (probe only): {cycle_cpu / args.interval:.1f}; "
              f"one process keeps up with {int(args.interval / per_device):,} devices")
        write_figures(args, snaps)
        push_figures(args, snaps)
    finally:
        teardown_databases(old, verbosity=0)


if __name__ == "__main__":
    main()
