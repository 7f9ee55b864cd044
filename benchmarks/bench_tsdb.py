"""The time-series store's figures (issue 17), on a VictoriaMetrics of its own.

    python benchmarks/bench_tsdb.py [--devices 10000] [--minutes 60] [--p95-hours 24]
                                    [--history-days 30] [--no-outage] [--keep DIR | --reads DIR]

Prints:
- write: an hour of a 10,000-device fleet's samples, generated directly (the values of
  emulated devices, polled at each cycle; timestamps one 5 s interval apart), sent as the
  poll sends them (fleet.tsdb.writes: remote write, each shard's cycle in requests of at
  most 4 MiB, 2 shards), one request after the other: samples/s for one worker process,
  encoding included, and the worker's CPU per device per cycle; the same samples through
  VictoriaMetrics' text import, for comparison;
- storage: bytes per stored sample (the data folder after a flush and a forced merge);
- reads: one device's 8 key counters (fleet/reading/key_counters.py: the 4 key counters and the
  first 4 health-rule series) over 2 h and over 30 days (min/avg/max_over_time, a point per
  pixel of ~1000), and the fleet-wide p95 temperature by device type over 24 h
  (quantile by (type) over avg_over_time, ~1000 points), medians of 5 with the store's
  result cache off;
- outage: the 60 s outage test's count (tests/scenarios/test_tsdb_outage.py).

Figures depend on the machine and its load: say which when you quote them.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from harness import (
    INTERVAL,
    ROOT,
    VictoriaMetrics,
    django_env,
    fleet_keys,
    load_average,
    median,
    source_snapshots,
)

SHARDS = 2
LABELS = ""  # the store is the benchmark's own: no TSDB_LABELS, as a default installation


def setup(args) -> None:
    django_env(FLEET_HOSTS=args.source_hosts, FLEET_DEVICES_PER_HOST="8",
               EMULATOR_STATE_DIR=tempfile.mkdtemp(prefix="asicmon-bench-tsdb-"),
               REDIS_KEY_PREFIX="asicmon-bench-tsdb", LOG_LEVEL="WARNING")


def write_hour(args, store) -> dict:
    """An hour of the fleet, written as the poll writes it; wall and CPU of the writes."""
    from fleet.tsdb.client import Client
    from fleet.tsdb.writes import Encoder

    client = Client(store.url, write_timeout_s=120)
    encoder = Encoder()
    cycles = int(args.minutes * 60 / INTERVAL)
    end = time.time() // INTERVAL * INTERVAL - 3600
    samples = encode_cpu = write_cpu = wall = 0.0
    keys = None
    pool_of_cycle = []
    started = time.perf_counter()
    for c, pool in enumerate(source_snapshots(args.source_hosts, cycles, end)):
        if keys is None:
            keys = fleet_keys(args.devices, pool)
        pool_of_cycle.append([s.get("temperature_c") for s in pool])
        last_pool = pool
        keyed = [(key, pool[d % len(pool)]) for d, key in enumerate(keys)]
        cycle = end - (cycles - c) * INTERVAL
        per_shard = (len(keyed) + SHARDS - 1) // SHARDS
        for shard in range(SHARDS):
            t0, c0 = time.perf_counter(), time.process_time()
            batches = encoder.batches(cycle, f"shard:{shard}/{SHARDS}", keyed[shard * per_shard:(shard + 1) * per_shard], LABELS)
            c1 = time.process_time()
            for batch in batches:
                client.write(batch.body)
                samples += batch.samples
            wall += time.perf_counter() - t0
            encode_cpu += c1 - c0
            write_cpu += time.process_time() - c1
    return {"cycles": cycles, "samples": int(samples), "wall": wall, "encode_cpu": encode_cpu,
            "post_cpu": write_cpu, "end": end, "keys": keys, "temperatures": pool_of_cycle,
            "elapsed": time.perf_counter() - started, "last_pool": last_pool}


def compare_protocols(store, keys, pool, cycles: int = 10) -> tuple[float, float]:
    """The same samples (the hour's last values, at earlier cycles of the same series) sent
    by remote write and by VictoriaMetrics' text import (/api/v1/import/prometheus, each
    series' name and labels formatted once), requests of ~4 MiB one after the other:
    samples/s of each, encoding or formatting included."""
    import http.client

    from fleet.tsdb.client import Client
    from fleet.tsdb.series import parse_labels, series_counters
    from fleet.tsdb.writes import Encoder

    keyed = [(key, pool[d % len(pool)]) for d, key in enumerate(keys)]
    base = time.time() // INTERVAL * INTERVAL - 3 * 3600
    client, encoder, samples = Client(store.url, write_timeout_s=120), Encoder(), 0
    encoder.batches(base, "warm", keyed, LABELS)  # the series' bytes, as a running poll has them
    t0 = time.perf_counter()
    for c in range(cycles):
        for batch in encoder.batches(base + c * INTERVAL, "bench", keyed, LABELS):
            client.write(batch.body)
            samples += batch.samples
    remote_write = samples / (time.perf_counter() - t0)

    extra = dict(parse_labels(LABELS))
    names = series_counters()
    prefixes = []
    for key in keys:
        labels = ",".join(f'{k}="{v}"' for k, v in {**key.labels(), **extra}.items())
        prefixes.append([(counter, f"{name}{{{labels}}} ") for counter, name in names])
    conn = http.client.HTTPConnection(store.url.removeprefix("http://"), timeout=120)
    samples, t0 = 0, time.perf_counter()
    for c in range(cycles):
        ts = f" {round((base - 3600 + c * INTERVAL) * 1000)}\n"
        lines = []
        for d, device in enumerate(prefixes):
            snapshot = pool[d % len(pool)]
            for counter, prefix in device:
                value = snapshot.get(counter)
                if value.__class__ in (int, float):
                    lines.append(prefix + repr(float(value)) + ts)
        for start in range(0, len(lines), 25_000):
            conn.request("POST", "/api/v1/import/prometheus", body="".join(lines[start:start + 25_000]).encode())
            conn.getresponse().read()
        samples += len(lines)
    return remote_write, samples / (time.perf_counter() - t0)


# One sample inside a TimeSeries: field 2 (length 16) holding a Sample (double, 6-byte varint).
SAMPLE = np.dtype([("tag", "u1"), ("length", "u1"), ("value_tag", "u1"), ("value", "<f8"), ("ts_tag", "u1"),
                   ("ts", "u1", (6,))])


def many_samples(labels: dict[str, str], ts_ms: np.ndarray, values: np.ndarray) -> bytes:
    """A TimeSeries with many samples (a backfill; the poll writes one per series and cycle)."""
    from fleet.tsdb.writes import _labels, _varint

    samples = np.empty(len(ts_ms), SAMPLE)
    samples["tag"], samples["length"], samples["value_tag"], samples["ts_tag"] = 0x12, 16, 0x09, 0x10
    samples["value"] = values
    for k in range(6):  # timestamps of 2^35..2^42 ms (1971-2109) take 6 varint bytes
        samples["ts"][:, k] = ((ts_ms >> (7 * k)) & 0x7F) | (0x80 if k < 5 else 0)
    body = _labels(labels) + samples.tobytes()
    return b"\x0a" + _varint(len(body)) + body


def backfill(client, series) -> int:
    """Send (labels, ts_ms, values) series in requests of about 4 MiB: samples sent."""
    from fleet.tsdb.writes import compress

    chunk, sent = bytearray(), 0
    for labels, ts_ms, values in series:
        chunk += many_samples(labels, ts_ms, values)
        sent += len(ts_ms)
        if len(chunk) > 4 << 20:
            client.write(compress(chunk))
            chunk.clear()
    if chunk:
        client.write(compress(chunk))
    return sent


def write_history(store, days: float, end: float, key) -> int:
    """`days` of one device's 8 key counters, every 5 s up to `end` (a day's cycle of made-up values)."""
    from fleet.reading.key_counters import KEY_COUNTERS, RULE_SERIES
    from fleet.tsdb.client import Client
    from fleet.tsdb.series import parse_labels, series_name

    client = Client(store.url, write_timeout_s=300)
    labels = {**key.labels(), **dict(parse_labels(LABELS))}
    cycles = int(days * 86400 / INTERVAL)
    ts = np.round((end - (cycles - np.arange(cycles)) * INTERVAL) * 1000).astype(np.int64)
    rng = np.random.default_rng(1)
    sent = 0
    for n, counter in enumerate((*KEY_COUNTERS, *RULE_SERIES[:4])):
        day = np.sin(np.arange(cycles) * 2 * np.pi / 17280)
        values = np.round(50 + 20 * day + rng.normal(0, 1, cycles), 2) * (n + 1)
        for start in range(0, cycles, 200_000):
            sent += backfill(client, [({**labels, "__name__": series_name(counter.name)},
                                       ts[start:start + 200_000], values[start:start + 200_000])])
    return sent


def write_temperatures(store, keys, temperatures, hours: float, end: float) -> int:
    """The fleet's temperature only, `hours` before `end` (the last hour is written whole),
    the source devices' values of the hour written over again."""
    from fleet.tsdb.client import Client
    from fleet.tsdb.series import parse_labels, series_name

    client = Client(store.url, write_timeout_s=300)
    extra = dict(parse_labels(LABELS))
    name = series_name("temperature_c")
    table = np.array([[np.nan if v is None else v for v in pool] for pool in temperatures], dtype=float)
    per_hour = int(3600 / INTERVAL)
    sent = 0
    for hour in range(int(hours)):
        start = end - (int(hours) - hour) * 3600
        ts = np.round((start + np.arange(per_hour) * INTERVAL) * 1000).astype(np.int64)
        sent += backfill(client, (
            ({**key.labels(), **extra, "__name__": name}, ts, np.resize(table[:, d % table.shape[1]], per_hour))
            for d, key in enumerate(keys)
        ))
    return sent


def cold_client(url: str):
    """A client whose queries skip VictoriaMetrics' result cache (nocache=1): every read
    reads the stored samples."""
    from fleet.tsdb.client import Client

    class Cold(Client):
        def _read(self, path: str, params: dict) -> dict:
            return super()._read(path, {**params, "nocache": "1"})

    return Cold(url, read_timeout_s=120)


def timed(client, query: str, start: float, end: float, step: float, runs: int = 5) -> tuple[float, int]:
    """Median milliseconds of a range query (through the client: answer parsed), and its points."""
    times, points = [], 0
    for _ in range(runs):
        t0 = time.perf_counter()
        series = client.query_range(query, start, end, step)
        times.append(time.perf_counter() - t0)
        points = sum(len(s.points) for s in series)
    return median(times) * 1000, points


def device_reads(client, key, end: float, span: float) -> dict[str, float]:
    """One device's 8 key counters over `span`, ~1000 points: ms of min/avg/max_over_time
    as three queries (any PromQL store), and of MetricsQL's rollup() (all three in one pass)."""
    from fleet.reading.key_counters import KEY_COUNTERS, RULE_SERIES
    from fleet.tsdb.series import selector, series_name

    names = "|".join(series_name(k.name) for k in (*KEY_COUNTERS, *RULE_SERIES[:4]))
    step = max(INTERVAL, round(span / 1000))
    inside = selector("", extra=LABELS, device=str(key.device_id))[1:-1]
    series = f'{{__name__=~"{names}",{inside}}}[{step}s]'
    three = sum(timed(client, f"{fn}({series})", end - span, end, step)[0]
                for fn in ("min_over_time", "avg_over_time", "max_over_time"))
    one, points = timed(client, f"rollup({series})", end - span, end, step)
    assert points >= 3 * 8 * 900, points
    return {"three": three, "rollup": one}


def record_aggregates(store, start: float, end: float) -> float:
    """vmalert's replay: the recording rules evaluated every 5 s over [start, end] and
    written to the store, as a running vmalert would have: seconds it took."""
    from datetime import UTC, datetime

    from dashboard.backing_services import free_port, vmalert_argv
    from fleet.tsdb.series import recording_rules

    rules = store.folder / "rules.yml"
    rules.write_text(recording_rules(LABELS))
    argv = vmalert_argv(rules, store.url, store.url, INTERVAL, free_port())
    iso = lambda t: datetime.fromtimestamp(t, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")  # noqa: E731
    t0 = time.perf_counter()
    subprocess.run([*argv, f"-replay.timeFrom={iso(start)}", f"-replay.timeTo={iso(end)}",
                    f"-datasource.queryStep={INTERVAL:g}s", "-replay.disableProgressBar", "-replay.rulesDelay=0s"],
                   check=True, capture_output=True)
    store.get("/internal/force_flush")
    return time.perf_counter() - t0


def outage_count() -> str:
    done = subprocess.run(
        [sys.executable, "-m", "dashboard.stack", "test", "tests/scenarios/test_tsdb_outage.py", "-k", "victoria",
         "-q", "-s", "-p", "no:cacheprovider"], cwd=ROOT, capture_output=True, text=True,
    )
    found = re.search(r"\{'waiting at the end of the outage'.*\}", done.stdout)
    return found.group(0) if found else f"(the outage test did not report: exit {done.returncode})\n{done.stdout[-1500:]}"


HISTORY_KEY = ("bench-history", 99_999_999, "BEN-HISTORY", "gpu", "GPU-X", 0)


def writes(args, store) -> dict:
    """The hour of the fleet, storage, the protocol comparison and the backfills: what the reads need."""
    from fleet.tsdb.series import DeviceKey

    hour = write_hour(args, store)
    n, cycles, devices = hour["samples"], hour["cycles"], args.devices
    print(f"write: {cycles} cycles x {devices} devices = {n:,} samples ({n / cycles / devices:.1f} per device and cycle), "
          f"{SHARDS} batches a cycle, in {hour['wall']:.1f} s of writing ({hour['elapsed']:.0f} s with the emulator)")
    print(f"  one worker process, encoding included: {n / hour['wall']:,.0f} samples/s (target >= 500,000)")
    per_device = (hour["encode_cpu"] + hour["post_cpu"]) / cycles / devices * 1e6
    print(f"  worker CPU per device per cycle: {per_device:.1f} us (encode + snappy {hour['encode_cpu'] / cycles / devices * 1e6:.1f}, "
          f"sending {hour['post_cpu'] / cycles / devices * 1e6:.1f}; target <= 20)")
    print(f"  encoding alone: {n / hour['encode_cpu']:,.0f} samples/s of CPU")
    size = store.settle()
    print(f"storage: {size:,} bytes for {n:,} samples = {size / n:.2f} bytes per sample (target <= 2; "
          f"{size / n * n / cycles * 17280 * 30 / 2**30:.1f} GiB for 30 days of this fleet)")
    remote_write, text = compare_protocols(store, hour["keys"], hour["last_pool"])
    print(f"  the same 10 cycles again, existing series: remote write {remote_write:,.0f} samples/s, "
          f"text import (/api/v1/import/prometheus) {text:,.0f} samples/s, encoding/formatting included")
    end = hour["end"]
    t0 = time.perf_counter()
    history = write_history(store, args.history_days, end, DeviceKey(*HISTORY_KEY))
    extra = write_temperatures(store, hour["keys"], hour["temperatures"], args.p95_hours - args.minutes / 60,
                               end - args.minutes * 60)
    print(f"  (backfilled {history:,} samples of one device's history and {extra:,} fleet temperatures "
          f"in {time.perf_counter() - t0:.0f} s)", flush=True)
    store.settle()  # reads on merged data, as an hour later
    return {"end": end, "devices": devices, "temperatures": extra + devices * cycles}


def reads(args, store, meta: dict) -> None:
    from fleet.tsdb.client import Client
    from fleet.tsdb.series import DeviceKey, selector

    client, warm = cold_client(store.url), Client(store.url, read_timeout_s=120)
    end, key = meta["end"], DeviceKey(*HISTORY_KEY)
    print("reads (median of 5; 'cold' skips the store's result cache, 'warm' is a repeat it serves):")
    for span, name, target in ((7200, "2 h", 30), (args.history_days * 86400, f"{args.history_days:g} days", 150)):
        cold = device_reads(client, key, end, span)
        hot = device_reads(warm, key, end, span)
        print(f"  one device's 8 key counters over {name} (target <= {target} ms): min/avg/max_over_time, "
              f"3 queries: {cold['three']:.1f} ms cold, {hot['three']:.1f} ms warm; "
              f"rollup() (MetricsQL, one query): {cold['rollup']:.1f} ms cold")
    span = args.p95_hours * 3600
    step = round(span / 1000, 1)
    temperature = selector("asicmon_temperature_c", extra=LABELS)
    query = f"quantile by (type) (0.95, avg_over_time({temperature}[{step}s]))"
    ms, points = timed(client, query, end - span, end, step, runs=3)
    print(f"  fleet p95 temperature by type over {args.p95_hours:g} h from every device's series "
          f"({meta['devices']} devices, {meta['temperatures']:,} samples): {ms:.0f} ms cold ({points} points; target <= 500 ms)")
    recorded = selector("asicmon:temperature_c:p95_by_type", extra=LABELS)
    if not client.query(f"count_over_time({recorded}[{span:.0f}s])", end):
        took = record_aggregates(store, end - span, end)
        print(f"  (vmalert replayed the recording rules, every 5 s over the {args.p95_hours:g} h, in {took:.0f} s)")
    ms, points = timed(client, f"max_over_time({recorded}[{step}s])", end - span, end, step)
    print(f"  the same from the recorded aggregate (vmalert, every 5 s): {ms:.1f} ms cold ({points} points)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--devices", type=int, default=10_000)
    parser.add_argument("--minutes", type=float, default=60)
    parser.add_argument("--p95-hours", type=float, default=24)
    parser.add_argument("--history-days", type=float, default=30)
    parser.add_argument("--source-hosts", type=int, default=30, help="emulated hosts whose values the fleet takes")
    parser.add_argument("--no-outage", action="store_true")
    parser.add_argument("--keep", type=Path, help="keep the store's folder here (for --reads)")
    parser.add_argument("--reads", type=Path, help="only the reads, on a folder kept by --keep")
    args = parser.parse_args()
    setup(args)
    store = VictoriaMetrics(args.reads or args.keep)
    try:
        print(f"VictoriaMetrics (victoria-metrics {store.url}), {args.devices} devices, {os.cpu_count()} cores, "
              f"load average {load_average()}", flush=True)
        if args.reads:
            meta = json.loads((args.reads / "bench.json").read_text())
        else:
            meta = writes(args, store)
            (store.folder / "bench.json").write_text(json.dumps(meta))
        reads(args, store, meta)
        print(f"(load average {load_average()} at the end)")
    finally:
        store.stop()
    if not args.no_outage and not args.reads:
        print(f"outage (60 s, tests/scenarios/test_tsdb_outage.py): {outage_count()}")


if __name__ == "__main__":
    main()
