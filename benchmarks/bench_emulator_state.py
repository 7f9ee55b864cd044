"""The cost of keeping an emulated host's state between polls, by store: a HostMonitor.poll
of one host with its state in memory only, in files (EMULATOR_STATE=file) and in Redis
(EMULATOR_STATE=redis). Prints medians per poll and per device, and the load average.

    .venv/bin/python benchmarks/bench_emulator_state.py [--devices 8] [--polls 300]

Two cases per store: one poller (the host's state is written each poll and never read
back: the usual case, a shard polled by one worker), and two pollers taking turns (each
poll reads and parses the state the other wrote: the worst case, as when two workers'
machines poll the same host in turn). Redis is the one at REDIS_URL, under a key prefix of
this run's own that it deletes at the end.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from harness import Report, load_average, median, percentile, wipe_redis

from emulator import FleetConfig
from emulator.state_store import FileStateStore, RedisStateStore
from fleet.hosts.emulated_monitors import HostMonitor

T0 = 1_700_000_000.0


def timed_polls(monitors: list[HostMonitor], start: int, polls: int) -> list[float]:
    """Seconds of each poll, the monitors taking turns, 10 s of emulated time apart."""
    times = []
    for i in range(start, start + polls):
        monitor = monitors[i % len(monitors)]
        t = time.perf_counter()
        monitor.poll(T0 + 10 * (i + 1))
        times.append(time.perf_counter() - t)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--devices", type=int, default=8)
    parser.add_argument("--polls", type=int, default=300)
    parser.add_argument("--types", default="video,inference,gpu")
    args = parser.parse_args()
    cfg = FleetConfig(seed=42, hosts=1, devices_per_host=args.devices, types=tuple(args.types.split(",")))
    folder = tempfile.mkdtemp(prefix="asicmon-bench-state-")
    prefix = f"asicmon-bench-state-{os.getpid()}:emulator"
    url = os.environ.get("REDIS_URL") or "redis://127.0.0.1:6379/0"
    stores = {
        "memory": lambda case: None,
        "file": lambda case: FileStateStore(Path(folder) / case),
        "redis": lambda case: RedisStateStore.from_url(url, f"{prefix}:{case}"),
    }
    report = Report(f"HostMonitor.poll of one host of {args.devices} devices ({args.types}), median of {args.polls} "
                    "polls a case, the cases in turn")
    cases = {}
    for name, make in stores.items():
        for pollers in (1, 2):
            if name == "memory" and pollers == 2:
                continue  # nothing shared
            store = make(f"p{pollers}")
            cases[name, pollers] = [HostMonitor.open(cfg, "host-00", store=store) for _ in range(pollers)]
    times: dict[tuple, list[float]] = {case: [] for case in cases}
    try:
        for monitors in cases.values():
            for m in monitors:
                m.poll(T0)  # warm: opens the drivers, writes the first state
        rounds = 10  # the cases take turns, so that the machine's other load falls on all alike
        for r in range(rounds):
            for case, monitors in cases.items():
                times[case] += timed_polls(monitors, r * (args.polls // rounds), args.polls // rounds)
        for (name, pollers), found in times.items():
            mid, p90 = median(found), percentile(found, 90)
            case = "one poller" if pollers == 1 else "two pollers in turn (each poll re-reads)"
            report.line(f"  {name:6s} {case:42s} median {mid * 1e3:6.2f} ms ({mid * 1e6 / args.devices:5.0f} us a"
                        f" device), p90 {p90 * 1e3:6.2f} ms")
    finally:
        wipe_redis(f"{prefix}:*", RedisStateStore.from_url(url, prefix).client)
    report.line(f"  load average after:  {load_average()}")


if __name__ == "__main__":
    main()
