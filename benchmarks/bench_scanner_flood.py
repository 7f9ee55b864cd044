"""The event scanner against hash flooding (issue 49): a batch of 80,000 complete events
whose pids were computed to collide in the scanner's first, unkeyed hash tables (each one
lands in the same run of slots), against 80,000 ordinary distinct pids, and names made the
same way.

    python benchmarks/bench_scanner_flood.py [--events 80000] [--repeat 3]

Prints the CPU time of the scan of each batch (best of ``--repeat``) and whether it was read
or declined. Issue 49's goal: the colliding batch scanned in under 0.2 s (the unkeyed hash
took 2.7-5.2 s).
"""

from __future__ import annotations

import argparse
import sys
import time

from harness import machine_line

from tests.support.scanfuzz import colliding_pids
from traces.atrace.io.chrome import native


def batch(pids: list[int]) -> bytes:
    return ("[" + ",".join(f'{{"ph":"X","ts":{i},"name":"k","pid":{p}}}' for i, p in enumerate(pids)) + "]").encode()


def timed(text: bytes, repeat: int) -> tuple[float, bool]:
    best, read = float("inf"), False
    for _ in range(repeat):
        started = time.process_time()
        read = native.scan(text) is not None
        best = min(best, time.process_time() - started)
    return best, read


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=80_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    if native.scan is None:
        sys.exit(f"no scanner: {native.unavailable}")
    print(machine_line())
    for label, pids in [("colliding pids", colliding_pids(args.events)),
                        ("ordinary pids", list(range(1000, 1000 + args.events)))]:
        took, read = timed(batch(pids), args.repeat)
        print(f"{args.events:,} events, {label:15s}: {took * 1000:7.1f} ms CPU, {'read' if read else 'declined'}")


if __name__ == "__main__":
    main()
