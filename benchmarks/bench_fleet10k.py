"""A 10,000-device fleet (1,250 hosts x 8): where a poll cycle's time goes, and ingestion.

    DATABASE_URL=postgres://… python benchmarks/bench_fleet10k.py [--hosts 1250] [--probe-hosts 60]

Prints, for the fleet size asked for:
- probe: the emulator and the Asicmon refresh per device (timed on --probe-hosts hosts and
  scaled), hence the CPU seconds one cycle of the whole fleet needs and how many worker
  processes keep up with a POLL_INTERVAL;
- write: one cycle's samples (every device, every series counter) written with the
  idempotency guarantee into the hourly-partitioned table, three ways: COPY straight into
  the table behind a (scope, cycle) marker row (what polls use); COPY into a staging table
  then one INSERT … ON CONFLICT; and one row per device and cycle with the counters as an
  array (COPY + INSERT … ON CONFLICT). Wall time and the writer's own CPU time, the repeat
  of a cycle, range queries on each layout, and the 1-minute rollup of the cycles written;
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


def fleet_rows(snaps: list[dict], devices: int, cycle: datetime):
    """One cycle's sample rows for `devices` devices, cycling through real snapshots."""
    from fleet import samples

    ids = samples.counter_ids()
    rows = []
    for device_id in range(1, devices + 1):
        snap = snaps[device_id % len(snaps)]
        rows.extend(samples.rows_from_snapshot(device_id, cycle, snap, ids))
    return rows


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


def time_writes(write, make_rows, cycles: int) -> tuple[list[float], list[float], list[int]]:
    """Wall and CPU seconds of each cycle's write, and what each write reported."""
    from django.db import connection, transaction

    seconds, cpu, sent = [], [], []
    for i in range(cycles):
        rows = make_rows(i)
        t0, c0 = time.perf_counter(), time.process_time()
        with transaction.atomic(), connection.cursor() as cursor:
            sent.append(write(cursor.cursor, rows))
        seconds.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    return seconds, cpu, sent


def range_query_ms(sql: str, params) -> float:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(sql, params)  # plan and warm
        cursor.fetchall()
        t0 = time.perf_counter()
        for _ in range(20):
            cursor.execute(sql, params)
            cursor.fetchall()
        return (time.perf_counter() - t0) / 20 * 1000


def ingestion(args, snaps) -> None:
    from django.conf import settings
    from django.db import connection

    from fleet import rollups, samples

    if connection.vendor != "postgresql":
        print("  write: skipped (the ingestion figures need PostgreSQL: set DATABASE_URL)")
        return
    devices = args.hosts * 8
    counters = max(samples.counter_ids().values())
    base = time.time() // 3600 * 3600 - 7200  # two hours ago, on the hour: 12 cycles a minute

    def rows_at(offset):
        return lambda i: fleet_rows(snaps, devices, datetime.fromtimestamp(base + 5 * (i + offset), tz=UTC))

    n = len(rows_at(0)(0))
    print(f"  write one cycle ({n:,} samples, {devices:,} devices), median of {args.write_cycles}, idempotent, "
          f"load {os.getloadavg()[0]:.1f}:")
    ways = [
        ("marker row + COPY straight into the table (polls)", lambda c, r: samples.write_samples(r, "shard:0/1"), 0, True),
        ("  the same, not waiting for the WAL flush at commit", lambda c, r: samples.write_samples(r, "shard:0/1"), 300, False),
        ("COPY into staging + INSERT … ON CONFLICT", lambda c, r: samples.write_samples(r), 100, True),
        ("row per device and cycle, counters as an array", lambda c, r: write_arrays(c, r, counters), 200, True),
    ]
    # The ways take turns, cycle by cycle, so that a change in the machine's load falls on
    # all of them alike.
    timings = {label: ([], []) for label, *_ in ways}
    for i in range(args.write_cycles + 1):  # the last round repeats a cycle: adds nothing
        for label, write, offset, durable in ways:
            settings.SAMPLES_SYNCHRONOUS_COMMIT = durable
            secs, cpu, _ = time_writes(write, lambda _, o=offset, i=i: rows_at(o)(min(i, args.write_cycles - 1)), 1)
            timings[label][0].append(secs[0])
            timings[label][1].append(cpu[0])
    settings.SAMPLES_SYNCHRONOUS_COMMIT = True
    for label, (secs, cpu) in timings.items():
        median = statistics.median(secs[:-1])
        print(f"    {label:52s} {median * 1000:7.0f} ms {n / median:>9,.0f} samples/s, writer CPU "
              f"{statistics.median(cpu[:-1]) * 1000:5.0f} ms (repeat of a cycle {secs[-1] * 1000:.0f} ms)")
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
    q3 = range_query_ms(  # the device page: its charted counters over 15 minutes
        "SELECT counter_id, ts, value FROM fleet_sample WHERE device_id = %s AND counter_id = ANY(%s) "
        "AND ts >= %s AND ts <= %s ORDER BY ts",
        [42, list(range(1, 9)), since, until],
    )
    print(f"    range query, one device's counter over 2 h: partitioned per-sample table {q1:.2f} ms, "
          f"array table {q2:.2f} ms; the device page's 8 counters {q3:.2f} ms")
    with connection.cursor() as cursor:
        cursor.execute("SELECT sum(pg_total_relation_size(inhrelid)) FROM pg_inherits WHERE inhparent = 'fleet_sample'::regclass")
        size = cursor.fetchone()[0]
        cursor.execute("SELECT count(*) FROM fleet_sample")
        stored = cursor.fetchone()[0]
    print(f"    storage: {size / stored:.0f} bytes per sample with its primary key ({stored:,} samples)")
    t0 = time.perf_counter()
    rolled = rollups.roll_up(now=datetime.fromtimestamp(base + 3600, tz=UTC))
    seconds = time.perf_counter() - t0
    print(f"    rollups of the samples written ({stored:,}, {stored / n * 5 / 60:.1f} min of the fleet's polls): "
          f"{rolled.rows['1m']:,} 1-minute and {rolled.rows['1h']:,} 1-hour rows in {seconds:.2f} s")


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
        ingestion(args, snaps)
        push_figures(args, snaps)
    finally:
        teardown_databases(old, verbosity=0)


if __name__ == "__main__":
    main()
