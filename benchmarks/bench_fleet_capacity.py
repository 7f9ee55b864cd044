"""Polling capacity: where a poll cycle's time goes per device, and how large a fleet the
stack's Celery worker(s) keep up with at a 5 s interval.

    # where the time goes, at 1k and 10k devices (a throwaway database; PostgreSQL if DATABASE_URL says so)
    DATABASE_URL=postgres://… python benchmarks/bench_fleet_capacity.py breakdown [--devices 1000,10000]

    # a real run: Celery beat + worker(s) polling N emulated devices for M minutes, slots counted
    DATABASE_URL=postgres://… python benchmarks/bench_fleet_capacity.py run --devices 2000 --workers 1 --minutes 10

`breakdown` polls every shard of the fleet the way a worker does, one phase after another,
and prints each phase's CPU time (and wall time) per device: emulator physics, driver reads,
monitor refresh (the compiled Asimov code and the stats cache), thread hand-off, state-file
I/O, sample rows and their write, snapshots, health rules, remediation and the push.

`run` starts beat and a worker (``--workers`` processes) on their own database, Redis
prefix and queue, lets them poll for ``--minutes``, then counts, for every shard, the
slots of the run whose samples were written whole (every device of the shard), partly, or
not at all (a gap). Figures depend on the machine and its load: the load is printed too.
"""

from __future__ import annotations

import argparse
import os
import sys

from harness import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("breakdown", help="where a poll cycle's time goes, per device")
    b.add_argument("--devices", default="1000,10000", help="fleet sizes, comma-separated (8 devices per host)")
    b.add_argument("--cycles", type=int, default=2, help="cycles timed per fleet size (after one warm-up)")
    b.add_argument("--shards", type=int, default=2)
    r = sub.add_parser("run", help="a real run of beat + Celery worker(s), slots counted")
    r.add_argument("--devices", type=int, required=True, help="fleet size (8 devices per host)")
    r.add_argument("--workers", type=int, default=1, help="worker processes (Celery --concurrency)")
    r.add_argument("--minutes", type=float, default=10.0)
    r.add_argument("--shards", type=int, default=4)
    r.add_argument("--interval", type=float, default=5.0)
    r.add_argument("--keep", action="store_true", help="keep the run's database afterwards")
    args = parser.parse_args()
    os.chdir(ROOT)
    if args.command == "breakdown":
        from capacity_breakdown import breakdown

        breakdown([int(n) for n in args.devices.split(",")], args.cycles, args.shards)
    else:
        from capacity_run import real_run

        real_run(args)


if __name__ == "__main__":
    main()
