"""Sample storage in PostgreSQL: time partitions and retention, rollups, and reading at the
resolution a range needs (issue 12). The poll no longer writes here (fleet/tsdb, issue 17):
these tests put their rows in themselves, until the tables go."""

import json
import os
import random
import subprocess
import sys
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
import pytest
from django.db import connection, transaction

from fleet import partitions, rollups, samples
from fleet.models import Sample, SampleHour, SampleMinute

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.django_db
postgres_only = pytest.mark.skipif("connection.vendor != 'postgresql'", reason="partitions are PostgreSQL's")


def at(epoch: float) -> datetime:
    return datetime.fromtimestamp(epoch, tz=UTC)


@dataclass(frozen=True)
class Row:
    device_id: int
    counter_id: int
    ts: datetime
    value: float


def cycle_rows(devices, counters, ts: datetime, seed: int = 0) -> list[Row]:
    rng = random.Random(seed)
    return [Row(d, c, ts, rng.uniform(0, 100)) for d in devices for c in counters]


def write_rows(rows: list[Row]) -> None:
    """Rows into the (partitioned) table, the partitions they need made first."""
    if connection.vendor == "postgresql":
        with transaction.atomic(), connection.cursor() as cursor:
            partitions.ensure(cursor.cursor, Sample._meta.db_table, {r.ts for r in rows})
    Sample.objects.bulk_create(
        [Sample(device_id=r.device_id, counter_id=r.counter_id, ts=r.ts, value=r.value) for r in rows],
        ignore_conflicts=True,
    )


def stored(ts: datetime) -> dict:
    return {(d, c): v for d, c, v in Sample.objects.filter(ts=ts).values_list("device_id", "counter_id", "value")}


@pytest.fixture
def ids(seeded_fleet):
    counters = sorted(samples.counter_ids().values())[:5]
    return [d.id for d in seeded_fleet], counters


# --- Partitions and retention ---------------------------------------------------------------

@postgres_only
def test_partitions_are_made_before_a_write_and_take_over_the_defaults_rows(ids):
    devices, counters = ids
    hour = rollups.floor(datetime.now(tz=UTC), rollups.HOUR) + timedelta(hours=30)
    name = partitions.partition_name("fleet_sample", hour)
    early = Sample.objects.create(device_id=devices[0], counter_id=counters[0], ts=hour + timedelta(minutes=1), value=1.5)
    with connection.cursor() as cursor:
        assert name not in [p[0] for p in partitions.partitions(cursor.cursor, "fleet_sample")]
        cursor.execute("SELECT count(*) FROM fleet_sample_default")
        assert cursor.fetchone()[0] == 1  # no partition yet: the default keeps it

    rows = cycle_rows(devices, counters, hour + timedelta(minutes=2))
    write_rows(rows)

    with connection.cursor() as cursor:
        found = {p[0]: p[1:] for p in partitions.partitions(cursor.cursor, "fleet_sample")}
        assert found[name] == (hour, hour + timedelta(hours=1))
        cursor.execute(f'SELECT count(*) FROM "{name}"')
        assert cursor.fetchone()[0] == len(rows) + 1
        cursor.execute("SELECT count(*) FROM fleet_sample_default")
        assert cursor.fetchone()[0] == 0
    assert Sample.objects.get(device_id=early.device_id, counter_id=early.counter_id, ts=early.ts).value == 1.5


@postgres_only
def test_retention_drops_whole_partitions_and_keeps_everything_within_it(ids, settings):
    devices, counters = ids
    now = rollups.floor(datetime.now(tz=UTC), rollups.MINUTE)
    settings.SAMPLE_RETENTION_HOURS = 10
    cutoff = now - timedelta(hours=10)
    times = [cutoff - timedelta(hours=3), cutoff - timedelta(minutes=1), cutoff + timedelta(seconds=5), now]
    for n, ts in enumerate(times):
        write_rows(cycle_rows(devices, counters, ts, seed=n))
    per_cycle = len(devices) * len(counters)

    result = rollups.prune(now=now)

    assert partitions.partition_name("fleet_sample", rollups.floor(times[0], rollups.HOUR)) in result.dropped
    assert Sample.objects.filter(ts=times[0]).count() == 0
    for ts in times[2:]:  # within retention: all kept
        assert Sample.objects.filter(ts=ts).count() == per_cycle
    # Past retention but in the partition that straddles the cutoff: kept until it is past whole.
    straddling = rollups.floor(times[1], rollups.HOUR) + rollups.HOUR > cutoff
    assert Sample.objects.filter(ts=times[1]).count() == (per_cycle if straddling else 0)
    with connection.cursor() as cursor:  # and the next hours are ready for writes
        names = [p[0] for p in partitions.partitions(cursor.cursor, "fleet_sample")]
    assert partitions.partition_name("fleet_sample", now + timedelta(hours=2)) in names


@postgres_only
def test_the_migration_converts_a_plain_table_with_its_rows_and_back(monkeypatch):
    """partition_table / unpartition_table (migration 0008) on a table shaped like fleet_sample."""
    monkeypatch.setitem(partitions.WIDTHS, "conv_sample", timedelta(hours=1))
    monkeypatch.setitem(partitions.NAME_FORMATS, "conv_sample", "%Y%m%d%H")
    start = rollups.floor(datetime.now(tz=UTC), rollups.HOUR) - timedelta(hours=5)
    with connection.cursor() as c:
        cursor = c.cursor
        cursor.execute("CREATE TABLE conv_sample (ts timestamptz NOT NULL, value float8 NOT NULL, "
                       "counter_id smallint NOT NULL, device_id bigint NOT NULL, PRIMARY KEY (device_id, counter_id, ts))")
        cursor.execute("CREATE INDEX conv_ts_idx ON conv_sample (ts)")
        cursor.execute("INSERT INTO conv_sample SELECT %s + make_interval(mins => 7 * k), k, 1, 1 FROM generate_series(0, 40) k", [start])
        cursor.execute("SELECT * FROM conv_sample ORDER BY ts")
        before = cursor.fetchall()

        partitions.partition_table(cursor, "conv_sample", "device_id, counter_id, ts", "conv_ts_idx")

        assert partitions.is_partitioned(cursor, "conv_sample")
        found = partitions.partitions(cursor, "conv_sample")
        assert [p[1] for p in found[1:5]] == [start + timedelta(hours=h) for h in range(4)]
        cursor.execute("SELECT * FROM conv_sample ORDER BY ts")
        assert cursor.fetchall() == before
        cursor.execute("SELECT count(*) FROM conv_sample_default")
        assert cursor.fetchone()[0] == 0
        cursor.execute("SELECT amname FROM pg_class JOIN pg_am ON pg_am.oid = relam WHERE relname = 'conv_ts_idx'")
        assert cursor.fetchone()[0] == "brin"
        with pytest.raises(psycopg.errors.UniqueViolation), transaction.atomic():  # still a primary key
            cursor.execute("INSERT INTO conv_sample VALUES (%s, 0, 1, 1)", [start])

        partitions.unpartition_table(cursor, "conv_sample", "device_id, counter_id, ts", "conv_ts_idx")

        assert not partitions.is_partitioned(cursor, "conv_sample")
        cursor.execute("SELECT * FROM conv_sample ORDER BY ts")
        assert cursor.fetchall() == before


# --- Rollups ----------------------------------------------------------------------------

def expected_rollups(period: timedelta) -> dict:
    """min/mean/max/count per (device, counter, period start), computed here from raw samples."""
    groups: dict = {}
    for d, c, ts, v in Sample.objects.values_list("device_id", "counter_id", "ts", "value"):
        groups.setdefault((d, c, rollups.floor(ts, period)), []).append(v)
    return {k: (min(v), sum(v) / len(v), max(v), len(v)) for k, v in groups.items()}


def rolled(model) -> dict:
    return {(d, c, ts): (lo, mean, hi, n) for d, c, ts, lo, mean, hi, n in model.objects.values_list(
        "device_id", "counter_id", "ts", "min", "mean", "max", "count")}


def assert_same(got: dict, want: dict) -> None:
    assert set(got) == set(want)
    for key, (lo, mean, hi, n) in want.items():
        assert got[key] == (lo, pytest.approx(mean, rel=1e-9), hi, n), key


def test_rollups_equal_min_mean_max_of_the_raw_samples_and_are_idempotent(ids, settings):
    devices, counters = ids
    start = rollups.floor(datetime.now(tz=UTC), rollups.HOUR) - timedelta(hours=3, minutes=2)
    for n in range(40):  # 40 cycles, 5 s apart but for a few missed polls, across an hour's end
        if n % 7 != 3:
            write_rows(cycle_rows(devices, counters, start + timedelta(seconds=5 * n), seed=n))
    for n in range(12):  # and a later hour, a minute apart
        write_rows(cycle_rows(devices, counters, start + timedelta(hours=1, minutes=5 + n), seed=100 + n))
    now = start + timedelta(hours=3, seconds=5)

    rollups.roll_up(now=now)
    assert_same(rolled(SampleMinute), expected_rollups(rollups.MINUTE))
    hours = {k: v for k, v in expected_rollups(rollups.HOUR).items() if k[2] < rollups.floor(now, rollups.HOUR)}
    assert_same(rolled(SampleHour), hours)
    assert len({k[2] for k in hours}) == 3

    # Again: nothing changes. A minute whose last poll slot has not passed yet is left for
    # the next run, so that a cycle written late in its slot is counted.
    before = rolled(SampleMinute)
    assert rollups.roll_up(now=now).rows == {"1m": 0, "1h": 0}
    assert rolled(SampleMinute) == before
    pending = rollups.floor(now, rollups.MINUTE) - rollups.MINUTE
    assert now - pending < rollups.MINUTE + timedelta(seconds=2 * settings.POLL_INTERVAL)
    assert not any(k[2] == pending for k in before)
    write_rows([Row(devices[0], counters[0], pending + timedelta(seconds=55), 1e6)])
    rollups.roll_up(now=now + timedelta(minutes=1))
    assert_same(rolled(SampleMinute), expected_rollups(rollups.MINUTE))
    assert rolled(SampleMinute)[(devices[0], counters[0], pending)] == (1e6, 1e6, 1e6, 1)


# --- Reading at the resolution of the range ------------------------------------------------

def test_resolution_follows_the_span_and_the_retention(settings):
    settings.SAMPLE_RETENTION_HOURS = 24
    settings.SAMPLE_MINUTE_RETENTION_DAYS = 10
    now = datetime.now(tz=UTC)
    assert rollups.choose_resolution(now - timedelta(minutes=15), now, now) == "raw"
    assert rollups.choose_resolution(now - timedelta(hours=2), now, now) == "raw"
    assert rollups.choose_resolution(now - timedelta(hours=6), now, now) == "1m"
    assert rollups.choose_resolution(now - timedelta(days=2), now, now) == "1m"
    assert rollups.choose_resolution(now - timedelta(days=7), now, now) == "1h"
    old = now - timedelta(days=3)  # a short range older than the raw retention
    assert rollups.choose_resolution(old, old + timedelta(minutes=15), now) == "1m"
    older = now - timedelta(days=20)
    assert rollups.choose_resolution(older, older + timedelta(minutes=15), now) == "1h"


@pytest.fixture
def history(ids):
    """Two hours of samples ending now (every 20 s), rolled up: device, counter name."""
    devices, _ = ids
    temperature = samples.counter_ids()["temperature_c"]
    now = rollups.floor(datetime.now(tz=UTC), rollups.MINUTE)
    for n in range(360):
        ts = now - timedelta(seconds=20 * n)
        write_rows([Row(devices[0], temperature, ts, 40 + n % 30)])
    rollups.roll_up(now=now + timedelta(hours=2))  # every minute and hour of them complete
    return devices[0], now


def test_the_api_chooses_the_resolution_for_the_range_and_says_which(api_client, viewer, history):
    device, now = history
    api_client.force_login(viewer)
    url = f"/api/devices/{device}/samples/"

    def get(span, **extra):
        query = {"counter": "temperature_c", "since": (now - span).isoformat(), "until": now.isoformat(), **extra}
        response = api_client.get(url, query)
        assert response.status_code == 200, response.content
        return response.json()

    raw = get(timedelta(minutes=30))
    assert raw["resolution"] == "raw" and len(raw["points"]) == 91 and len(raw["points"][0]) == 2
    minutes = get(timedelta(hours=6))
    assert minutes["resolution"] == "1m" and len(minutes["points"]) == 121  # 2 h and the minute of `now`
    t, mean, low, high, count = minutes["points"][-2]
    assert count == 3 and low < mean < high and datetime.fromisoformat(t) == now - rollups.MINUTE
    assert minutes["points"][-1][4] == 1
    hours = get(timedelta(days=7))
    assert hours["resolution"] == "1h" and sum(p[4] for p in hours["points"]) == 360
    assert get(timedelta(minutes=30), resolution="1h")["resolution"] == "1h"
    bad = api_client.get(url, {"counter": "temperature_c", "resolution": "5m"})
    assert bad.status_code == 400 and "resolution" in bad.json()


def test_the_device_page_chooses_the_resolution_for_its_range(client, viewer, history):
    device, _ = history
    client.force_login(viewer)
    for range_key, resolution, traces in [("15m", "raw", 1), ("24h", "1m", 3), ("30d", "1h", 3)]:
        response = client.get(f"/devices/{device}/", {"range": range_key})
        assert response.status_code == 200
        assert response.context["resolution"] == resolution
        assert f'data-resolution="{resolution}"' in response.content.decode()
        figure = next(f for f in response.context["figures"] if f["counter"] == "temperature_c")
        assert len(figure["data"]) == traces and figure["live"] == (resolution == "raw")
        assert figure["data"][0]["y"], range_key
    bad = client.get(f"/devices/{device}/", {"range": "1y"})
    assert bad.status_code == 400 and b"15m" in bad.content


# --- SQLite -------------------------------------------------------------------------------

SQLITE_SCRIPT = """
import json, django
from datetime import UTC, datetime, timedelta
django.setup()
from django.core.management import call_command
call_command("migrate", verbosity=0)
from fleet import rollups, samples
from fleet.models import Device, Host, Sample, SampleMinute
host = Host.objects.create(name="h")
device = Device.objects.create(host=host, serial="s", device_type="gpu", index=0)
counter = samples.counter_ids()["temperature_c"]
now = rollups.floor(datetime.now(tz=UTC), rollups.MINUTE)
def write(rows):
    Sample.objects.bulk_create([Sample(device=device, counter_id=counter, ts=ts, value=v) for ts, v in rows],
                               ignore_conflicts=True)
rows = [(now - timedelta(seconds=5 * n), float(n)) for n in range(1, 25)]
write(rows)
write(rows)
rollups.roll_up(now=now + timedelta(minutes=1))
minutes = list(SampleMinute.objects.order_by("ts").values_list("min", "mean", "max", "count"))
write([(now - timedelta(days=30), 1.0)])
pruned = rollups.prune(now=now)
print(json.dumps({"samples": Sample.objects.count(), "minutes": minutes,
                  "points": len(rollups.read_points("raw", device.id, counter, now - timedelta(hours=1), now, 100)),
                  "resolution": rollups.choose_resolution(now - timedelta(days=1), now, now),
                  "deleted": pruned.deleted["fleet_sample"]}))
"""


def test_the_sqlite_path_writes_rolls_up_reads_and_prunes(tmp_path):
    env = dict(os.environ, DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite3'}", ASICMON_VAR_DIR=str(tmp_path),
               DJANGO_SETTINGS_MODULE="dashboard.settings")
    done = subprocess.run([sys.executable, "-c", SQLITE_SCRIPT], cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["samples"] == 24 and out["points"] == 24
    assert out["minutes"] == [[13.0, 18.5, 24.0, 12], [1.0, 6.5, 12.0, 12]]
    assert out["resolution"] == "1m" and out["deleted"] == 1
