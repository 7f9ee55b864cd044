"""Probe cost: a full refresh of one device through its compiled Asimov spec, a cached
counter query, and devices refreshed per second on one core. Prints figures.

    .venv/bin/python benchmarks/bench_probe.py [--refreshes 5000] [--types mtx] [--devices 12]
"""

from __future__ import annotations

import argparse
import time

from harness import Report, median, percentile

from emulator import EmulatedHost, FleetConfig
from fleet.hosts.emulated_monitors import HostMonitor, device_monitor

T0 = 1_700_000_000.0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--refreshes", type=int, default=5000)
    parser.add_argument("--types", default="video,inference,gpu", help="types of the polled host (e.g. mtx)")
    parser.add_argument("--devices", type=int, default=8, help="devices of the polled host")
    args = parser.parse_args()
    n = args.refreshes

    cfg = FleetConfig(seed=42, hosts=1, devices_per_host=3)
    host = EmulatedHost(cfg, "host-00")
    host.sync(T0)
    host.advance(T0 + 60)
    monitors = []
    report = Report(f"full refresh of one device through its compiled spec (median of {n}; target <= 50 us)")
    for d in host.spec.devices:
        m = device_monitor(host, d.serial)
        m.refresh(T0)
        monitors.append(m)
        times = []
        for i in range(n):
            t = time.perf_counter()
            m.refresh(T0 + i + 1)
            times.append(time.perf_counter() - t)
        report.line(f"  {d.type:10s} median {median(times) * 1e6:6.1f} us   p99 {percentile(times, 99) * 1e6:6.1f} us")

    m = monitors[0]
    q = 200_000
    t = time.perf_counter()
    for _ in range(q):
        m.get("temperature_c")
    get_us = (time.perf_counter() - t) / q * 1e6
    t = time.perf_counter()
    for _ in range(q // 10):
        m.snapshot()
    snap_us = (time.perf_counter() - t) / (q // 10) * 1e6
    report.line(
        f"cached counter query get(): {get_us:.3f} us (target <= 2 us); snapshot() copy: {snap_us:.2f} us"
    )

    rounds = n // 3
    t = time.perf_counter()
    for i in range(rounds):
        for m in monitors:
            m.refresh(T0 + 10_000 + i)
    rate = rounds * len(monitors) / (time.perf_counter() - t)
    report.line(
        f"devices refreshed per second on one core (mixed types, inline): {rate:,.0f} (target >= 10,000)"
    )

    types = tuple(t.strip() for t in args.types.split(",") if t.strip())
    hm = HostMonitor.open(
        FleetConfig(seed=42, hosts=1, devices_per_host=args.devices, types=types), "host-00", state_dir=None
    )
    hm.poll(T0)
    polls = 200
    t = time.perf_counter()
    for i in range(polls):
        hm.poll(T0 + 10 * (i + 1))
    per_poll = (time.perf_counter() - t) / polls
    report.line(
        f"HostMonitor.poll of {args.devices} devices ({','.join(types)}; emulator advance 10 s + budgeted parallel"
        f" probes, no disk): {per_poll * 1e3:.2f} ms, {per_poll * 1e6 / args.devices:.0f} us a device"
    )


if __name__ == "__main__":
    main()
