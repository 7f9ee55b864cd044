"""A 10,000-device fleet (1,250 hosts x 8): where a poll cycle's time goes, and ingestion.

    DATABASE_URL=postgres://… python benchmarks/bench_fleet10k.py [--hosts 1250] [--probe-hosts 60]

Prints, for the fleet size asked for:
- probe: the emulator and the Asicmon refresh per device (timed on --probe-hosts hosts and
  scaled), hence the CPU seconds one cycle of the whole fleet needs and how many worker
  processes keep up with a POLL_INTERVAL;
- write: one cycle's samples (every device, every series counter) written with the
  idempotency guarantee, three ways: today's INSERT … SELECT unnest(…) ON CONFLICT; COPY into
  a staging table then one INSERT … ON CONFLICT; and one row per device and cycle with the
  counters as an array (COPY + INSERT … ON CONFLICT), with a range query on each;
- push: the bytes of one cycle's fleet message, the whole fleet to every fleet page.

Runs on a throwaway database it creates and drops (PostgreSQL for the write figures).
Figures depend on the machine and its load: say which when you quote them.
"""

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
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
    from fleet import services

    names = [h.name for h in fleet_layout(services.fleet_config())][: args.probe_hosts]
    monitors = [services.host_monitor(n) for n in names]
    now = time.time()
    for m in monitors:
        m.poll(now - 5)  # warm: rates need a previous refresh
    per_cycle = []
    for cycle in range(3):
        t0 = time.perf_counter()
        snaps = [s for m in monitors for s in m.poll(now + 5 * cycle).values()]
        per_cycle.append(time.perf_counter() - t0)
    return statistics.median(per_cycle) / len(snaps), snaps


def fleet_rows(snaps: list[dict], devices: int, cycle: datetime):
    """One cycle's sample rows for `devices` devices, cycling through real snapshots."""
    from fleet import samples

    ids = samples.counter_ids()
    rows = []
    for device_id in range(1, devices + 1):
        snap = snaps[device_id % len(snaps)]
        rows.extend(samples.rows_from_snapshot(device_id, cycle, snap, ids))
    return rows


def write_unnest(cursor, rows) -> None:
    cursor.execute(
        "INSERT INTO fleet_sample (device_id, counter_id, ts, value) "
        "SELECT * FROM unnest(%s::bigint[], %s::smallint[], %s::timestamptz[], %s::float8[]) ON CONFLICT DO NOTHING",
        [[r.device_id for r in rows], [r.counter_id for r in rows], [r.ts for r in rows], [r.value for r in rows]],
    )


def write_copy_staging(cursor, rows) -> None:
    cursor.execute("CREATE TEMP TABLE IF NOT EXISTS sample_staging (device_id bigint, counter_id smallint, ts timestamptz, value float8) ON COMMIT DELETE ROWS")
    with cursor.copy("COPY sample_staging (device_id, counter_id, ts, value) FROM STDIN") as copy:
        for r in rows:
            copy.write_row((r.device_id, r.counter_id, r.ts, r.value))
    cursor.execute("INSERT INTO fleet_sample (device_id, counter_id, ts, value) SELECT device_id, counter_id, ts, value FROM sample_staging ON CONFLICT DO NOTHING")


def write_arrays(cursor, rows, counters: int) -> None:
    """One row per device and cycle: values[counter_id] (NULL where a counter has no value)."""
    cursor.execute("CREATE TABLE IF NOT EXISTS bench_device_cycle (device_id bigint, ts timestamptz, v float8[], PRIMARY KEY (device_id, ts))")
    cursor.execute("CREATE TEMP TABLE IF NOT EXISTS cycle_staging (device_id bigint, ts timestamptz, v float8[]) ON COMMIT DELETE ROWS")
    by_device: dict[int, list] = {}
    for r in rows:
        by_device.setdefault(r.device_id, [None] * counters)[r.counter_id - 1] = r.value
    ts = rows[0].ts
    with cursor.copy("COPY cycle_staging (device_id, ts, v) FROM STDIN") as copy:
        for device_id, values in by_device.items():
            copy.write_row((device_id, ts, values))
    cursor.execute("INSERT INTO bench_device_cycle SELECT * FROM cycle_staging ON CONFLICT DO NOTHING")


def time_writes(label, write, make_rows, cycles: int) -> list[float]:
    from django.db import connection, transaction

    seconds = []
    for i in range(cycles):
        rows = make_rows(i)
        t0 = time.perf_counter()
        with transaction.atomic(), connection.cursor() as cursor:
            write(cursor.cursor, rows)
        seconds.append(time.perf_counter() - t0)
    return seconds


def range_query_ms(sql: str, params) -> float:
    from django.db import connection

    with connection.cursor() as cursor:
        t0 = time.perf_counter()
        for _ in range(20):
            cursor.execute(sql, params)
            cursor.fetchall()
        return (time.perf_counter() - t0) / 20 * 1000


def ingestion(args, snaps) -> None:
    from django.db import connection

    from fleet import samples

    if connection.vendor != "postgresql":
        print("  write: skipped (the ingestion figures need PostgreSQL: set DATABASE_URL)")
        return
    devices = args.hosts * 8
    counters = max(samples.counter_ids().values())
    base = time.time() // 5 * 5

    def rows_at(offset):
        return lambda i: fleet_rows(snaps, devices, datetime.fromtimestamp(base + 5 * (i + offset), tz=UTC))

    n = len(rows_at(0)(0))
    print(f"  write one cycle ({n:,} samples, {devices:,} devices), median of {args.write_cycles}, idempotent:")
    ways = [
        ("INSERT … SELECT unnest(…) ON CONFLICT (today)", write_unnest, 0),
        ("COPY into staging + INSERT … ON CONFLICT", write_copy_staging, 100),
        ("row per device and cycle, counters as an array", lambda c, r: write_arrays(c, r, counters), 200),
    ]
    for label, write, offset in ways:
        secs = time_writes(label, write, rows_at(offset), args.write_cycles)
        repeat = time_writes(label, write, rows_at(offset), 1)  # the same cycle again: all conflicts
        median = statistics.median(secs)
        print(f"    {label:50s} {median * 1000:8.1f} ms  {n / median:>11,.0f} samples/s  (repeat of a cycle {repeat[0] * 1000:.0f} ms)")
    since = datetime.fromtimestamp(base - 3600, tz=UTC)
    until = datetime.fromtimestamp(base + 3600, tz=UTC)
    q1 = range_query_ms(
        "SELECT ts, value FROM fleet_sample WHERE device_id = %s AND counter_id = %s AND ts BETWEEN %s AND %s ORDER BY ts",
        [42, 3, since, until],
    )
    q2 = range_query_ms(
        "SELECT ts, v[3] FROM bench_device_cycle WHERE device_id = %s AND ts BETWEEN %s AND %s ORDER BY ts",
        [42, since, until],
    )
    print(f"    range query, one device's counter over 2 h: per-sample table {q1:.2f} ms, array table {q2:.2f} ms")


def push_figures(args, snaps) -> None:
    from fleet import services

    devices = args.hosts * 8
    lines = [services.device_line(i, {**snaps[i % len(snaps)], "health": "ok", "health_reasons": []}) for i in range(devices)]
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
        ingestion(args, snaps)
        push_figures(args, snaps)
    finally:
        teardown_databases(old, verbosity=0)


if __name__ == "__main__":
    main()
