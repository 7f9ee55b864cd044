"""The shared fault history (400 servers x 8 devices, 349 days) replayed with jobs under the
three policies: wall and CPU time, and peak memory (goal: <= 10 minutes on one core, <= 2 GB).

    .venv/bin/python benchmarks/bench_replay.py [HISTORY] [--jobs 128,8x30] [--repeat 3]

A loaded machine stretches wall time; CPU time is what the process itself spent.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from emulator.replay.cli import parse_jobs  # noqa: E402
from emulator.replay.engine import Settings, replay  # noqa: E402
from emulator.replay.history import load_history  # noqa: E402
from emulator.replay.report import summarise  # noqa: E402

SHARED = Path(__file__).resolve().parents[1] / "../shared/data/fault-traces/infinitehbd_fault_trace.json"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("history", nargs="?", default=str(SHARED))
    parser.add_argument("--jobs", default="128,8x30")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    s = Settings(jobs=parse_jobs(args.jobs))
    walls, cpus = [], []
    for _ in range(args.repeat):
        w0, c0 = time.perf_counter(), time.process_time()
        faults = load_history(args.history)
        summary = summarise(replay(faults, s), faults, s)
        walls.append(time.perf_counter() - w0)
        cpus.append(time.process_time() - c0)
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"{len(faults)} faults, {s.nodes} x {s.devices_per_node} devices, {len(s.jobs)} jobs "
          f"({sum(s.jobs)} servers), 3 policies")
    print(f"wall {statistics.median(walls):.3f} s, cpu {statistics.median(cpus):.3f} s (median of {args.repeat}); "
          f"peak memory {peak_mb:.0f} MB (process)")
    for name, p in summary["policies"].items():
        print(f"  {name:8} ETTR {100 * p['ettr']:.3f} %  device-hours in service {p['device_hours_in_service']:,.0f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
