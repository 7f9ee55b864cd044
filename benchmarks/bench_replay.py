"""The shared fault history (400 servers x 8 devices, 349 days) replayed with jobs under the
three policies: wall and CPU time, and peak memory (goal: <= 10 minutes on one core, <= 2 GB).

    .venv/bin/python benchmarks/bench_replay.py [HISTORY] [--jobs 128,8x30] [--repeat 3]

A loaded machine stretches wall time; CPU time is what the process itself spent.
"""

from __future__ import annotations

import argparse

from harness import ROOT, Report, peak_rss_mb, timed

from emulator.replay.cli import parse_jobs
from emulator.replay.engine import Settings, replay
from emulator.replay.history import load_history
from emulator.replay.report import summarise

SHARED = ROOT / "../shared/data/fault-traces/infinitehbd_fault_trace.json"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("history", nargs="?", default=str(SHARED))
    parser.add_argument("--jobs", default="128,8x30")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    s = Settings(jobs=parse_jobs(args.jobs))

    def run() -> tuple[list, dict]:
        faults = load_history(args.history)
        return faults, summarise(replay(faults, s), faults, s)

    timing = timed(run, args.repeat)
    faults, summary = timing.value
    report = Report(f"{len(faults)} faults, {s.nodes} x {s.devices_per_node} devices, {len(s.jobs)} jobs "
                    f"({sum(s.jobs)} servers), 3 policies")
    report.line(f"wall {timing.median:.3f} s, cpu {timing.cpu_median:.3f} s (median of {args.repeat}); "
                f"peak memory {peak_rss_mb():.0f} MB (process)")
    for name, p in summary["policies"].items():
        report.line(f"  {name:8} ETTR {100 * p['ettr']:.3f} %  device-hours in service {p['device_hours_in_service']:,.0f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
