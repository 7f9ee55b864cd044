"""The readers' figures: what a device page, the samples API and a fleet-wide aggregate cost
through fleet.tsdb.reads, on a VictoriaMetrics of its own (its result cache off).

    python benchmarks/bench_history.py [--days 30] [--devices 10000] [--p95-hours 24] [--p95-every 60]

Writes `--days` of one device's charted counters (the 4 key counters and 4 health-rule
series, a sample every 5 s: 8 x 17,280 a day) and `--p95-hours` of `--devices` devices'
temperatures (a sample every `--p95-every` s, three device types); then prints, medians of 5:
- the device page's history read for each of its ranges (raw samples up to 1 h, min/mean/max
  bands beyond, a point per pixel of a ~600 px chart), points returned, and its 2 h read;
- the samples API's 1-minute points of one counter over 2 days;
- the fleet's p95 temperature by device type over `--p95-hours` (600 and 150 points), and
  one figure per type over the whole range.
Targets (issue 17): 8 counters over 2 h <= 30 ms, over 30 days <= 150 ms; p95 by type over
24 h at 10k devices <= 500 ms. Figures depend on the machine and its load: say which.
"""

import argparse
import os
import shutil
import tempfile
import time
import urllib.request
from datetime import timedelta
from pathlib import Path

from harness import load_average, median

INTERVAL = 5.0
LABELS = "asicmon_bench=history"
COUNTERS = ("device_utilization", "temperature_c", "power_w", "memory_used_bytes",
            "ecc_corrected_per_s", "clock_mhz", "pcie_link_width", "pcie_errors_per_s")
CHUNK = 200_000  # samples a write


def start_store(folder: Path):
    """A VictoriaMetrics as `make run` starts one, its result cache off (each read a real one)."""
    from dashboard.backing_services import free_port, start_victoria_metrics

    return start_victoria_metrics(folder, free_port(), 3650, extra_args=("-search.disableCache",))


def write(client, series) -> int:
    """series: [(labels, [(ms, value)])], sent in chunks of about CHUNK samples."""
    from fleet.polling.sample_export import encode_series
    from fleet.tsdb.writes import compress

    batch, size, total = [], 0, 0
    for labels, points in series:
        for k in range(0, len(points), CHUNK):
            part = points[k:k + CHUNK]
            batch.append((labels, part))
            size += len(part)
            if size >= CHUNK:
                client.write(compress(encode_series(batch)), timeout_s=120)
                total, batch, size = total + size, [], 0
    if batch:
        client.write(compress(encode_series(batch)), timeout_s=120)
        total += size
    return total


def timed(read, runs: int = 5) -> tuple[float, object]:
    times, result = [], None
    for _ in range(runs):
        t0 = time.perf_counter()
        result = read()
        times.append(time.perf_counter() - t0)
    return median(times) * 1000, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--days", type=float, default=30)
    parser.add_argument("--devices", type=int, default=10_000)
    parser.add_argument("--p95-hours", type=float, default=24)
    parser.add_argument("--p95-every", type=float, default=60.0, help="seconds between the fleet's temperature samples")
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dashboard.settings")
    os.environ["TSDB_LABELS"] = LABELS
    import django

    django.setup()
    from fleet.reading.queries import DEVICE_RANGES
    from fleet.tsdb import reads
    from fleet.tsdb.client import Client
    from fleet.tsdb.series import series_name

    folder = Path(tempfile.mkdtemp(prefix="asicmon-bench-history-"))
    proc, url = start_store(folder / "vm")
    try:
        client = Client(url, read_timeout_s=120)
        end = float(int(time.time()) // 60 * 60)
        device = {"host": "bench-host", "device": "99999999", "serial": "BENCH-HISTORY", "type": "gpu", "model": "X"}
        extra = {"asicmon_bench": "history"}
        count = int(args.days * 86400 / INTERVAL)
        t0 = time.perf_counter()
        written = write(client, (({"__name__": series_name(c), **device, **extra},
                                  [(round((end - INTERVAL * (count - i)) * 1000), 40.0 + (i * 7 + n) % 23) for i in range(count)])
                                 for n, c in enumerate(COUNTERS)))
        print(f"VictoriaMetrics {url}, {os.cpu_count()} cores, load average {load_average()}")
        print(f"history: {written:,} samples of one device ({len(COUNTERS)} counters, {args.days:g} days every "
              f"{INTERVAL:g} s) written in {time.perf_counter() - t0:.1f} s")
        types = ("gpu", "inference", "video")
        steps = int(args.p95_hours * 3600 / args.p95_every)
        t0 = time.perf_counter()
        fleet = write(client, (({"__name__": "asicmon_temperature_c", "host": f"h{d // 8}", "device": str(d),
                                 "serial": f"S{d}", "type": types[d % 3], "model": "X", **extra},
                                [(round((end - args.p95_every * (steps - i)) * 1000), 30.0 + (d * 13 + i) % 50)
                                 for i in range(steps)]) for d in range(args.devices)))
        print(f"fleet: {fleet:,} temperature samples of {args.devices:,} devices ({args.p95_hours:g} h every "
              f"{args.p95_every:g} s) written in {time.perf_counter() - t0:.1f} s")
        urllib.request.urlopen(url + "/internal/force_flush", timeout=300).close()
        time.sleep(1.1)

        metrics = {c: series_name(c) for c in COUNTERS}
        labels = {"device": device["device"]}
        for span, label in [*DEVICE_RANGES.values(), (timedelta(hours=2), "2 h")]:
            seconds = span.total_seconds()
            step = reads.chart_step(seconds, INTERVAL)
            if step is None:
                ms, got = timed(lambda s=seconds: reads.raw_points(client, metrics, labels, end - s, end,
                                                                    interval_s=INTERVAL, extra=LABELS))
                shape = "raw"
            else:
                ms, got = timed(lambda s=seconds, st=step: reads.bands(client, metrics, labels, end - s, end, st, extra=LABELS))
                shape = f"bands every {step} s"
            print(f"device page, {len(COUNTERS)} counters over {label:7s}: {ms:6.1f} ms, {shape}, "
                  f"{sum(map(len, got.values())):,} points")
        ms, got = timed(lambda: reads.bands(client, {"t": metrics["temperature_c"]}, labels, end - 2 * 86400, end, 60,
                                            extra=LABELS, count=True))
        print(f"samples API, one counter over 2 days at 1m: {ms:.1f} ms, {len(got['t']):,} points")
        span = args.p95_hours * 3600
        for points in (reads.CHART_POINTS, 150):
            step = max(args.p95_every, round(span / points))
            ms, got = timed(lambda st=step: reads.fleet_quantile(client, "asicmon_temperature_c", 0.95, end - span, end, st,
                                                                 extra=LABELS))
            print(f"fleet p95 temperature by type over {args.p95_hours:g} h, {args.devices:,} devices: {ms:.0f} ms "
                  f"({len(got)} types x {len(next(iter(got.values()), []))} points, a point every {step:g} s)")
        ms, got = timed(lambda: reads.fleet_quantile_over(client, "asicmon_temperature_c", 0.95, end - span, end, extra=LABELS))
        print(f"  one p95 per type over the whole {args.p95_hours:g} h (quantile_over_time): {ms:.0f} ms")
    finally:
        proc.terminate()
        proc.wait(30)
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
