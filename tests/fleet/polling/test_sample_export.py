"""Moving history out of PostgreSQL, as an operator does it: a database at migration 0008
holding samples and rollups; `migrate` refuses to drop them unexported (and changes
nothing); `export_samples` copies them to the store (the same points, read back); `migrate`
then drops the tables, or drops them unexported when ASICMON_DROP_SAMPLES=1 says so.

Each test runs manage.py in child processes on a database of its own (PostgreSQL when the
suite runs on it, the samples table partitioned as 0008 left it; else a SQLite file)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import time
import uuid
from pathlib import Path
from urllib.parse import urlparse

import pytest
from django.db import connection

from tests.support.processes import child_env
from tests.support.tsdb import flush, raw_samples

# Each test replays migrations and a dozen manage.py commands: the slow tier (`make test`).
pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[3]
TABLES = ["fleet_sample", "fleet_sample_hour", "fleet_sample_minute"]

# Puts rows into the old tables: devices "a" and "b" (made here) and "gone" (an id no device
# has), from the JSON on stdin; on PostgreSQL first makes fleet_sample partitioned by hour, as
# migration 0008 left it. Prints the devices' ids.
INSERT = """
import json, sys, django
django.setup()
from datetime import UTC, datetime
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from fleet.polling.counter_catalogue import counter_ids
# The models as the database has them (the old migration applied), not as fleet.models has them now.
loader = MigrationExecutor(connection).loader
old = loader.project_state(list(loader.applied_migrations)).apps
Device, Host = old.get_model("fleet", "Device"), old.get_model("fleet", "Host")
spec = json.load(sys.stdin)
if spec["partition"] and connection.vendor == "postgresql":
    with connection.cursor() as c:
        c.execute("ALTER TABLE fleet_sample RENAME TO fleet_sample_plain")
        c.execute("CREATE TABLE fleet_sample (LIKE fleet_sample_plain INCLUDING DEFAULTS, "
                  "PRIMARY KEY (device_id, counter_id, ts)) PARTITION BY RANGE (ts)")
        c.execute("DROP TABLE fleet_sample_plain")
        c.execute("CREATE TABLE fleet_sample_default PARTITION OF fleet_sample DEFAULT")
        for start in spec["hours"]:
            lo, hi = (datetime.fromtimestamp(t, tz=UTC).isoformat() for t in (start, start + 3600))
            c.execute(f"CREATE TABLE fleet_sample_p{start} PARTITION OF fleet_sample FOR VALUES FROM ('{lo}') TO ('{hi}')")
host, _ = Host.objects.get_or_create(name="old-host")
ids = {"gone": 987654}
for index, (key, kind) in enumerate([("a", "gpu"), ("b", "video")]):
    ids[key] = Device.objects.get_or_create(serial=f"OLD-{key}", defaults=dict(host=host, device_type=kind, model="M", index=index))[0].pk
counters = counter_ids()
adapt = connection.ops.adapt_datetimefield_value
with connection.cursor() as c:
    for table, rows in spec["rows"].items():
        columns = "value" if table == "fleet_sample" else '"min", "mean", "max", "count"'
        marks = "%s" if table == "fleet_sample" else "%s, %s, %s, %s"
        c.executemany(
            f"INSERT INTO {table} (device_id, counter_id, ts, {columns}) VALUES (%s, %s, %s, {marks})",
            [(ids[d], counters[n], adapt(datetime.fromtimestamp(t, tz=UTC)), *values) for d, n, t, *values in rows])
print(json.dumps(ids))
"""

TABLES_LEFT = """
import django, json
django.setup()
from django.db import connection
with connection.cursor() as c:
    names = connection.introspection.table_names(c)
    counts = {}
    for t in sorted(n for n in names if n in ("fleet_sample", "fleet_sample_minute", "fleet_sample_hour")):
        c.execute(f"SELECT count(*) FROM {t}")
        counts[t] = c.fetchone()[0]
print(json.dumps(counts))
"""


@pytest.fixture
def old_database(tmp_path):
    """A database of this test's own at migration fleet 0008 (the samples tables still there):
    the environment its child processes run with."""
    if connection.vendor == "postgresql":
        import psycopg

        parts = urlparse(child_env()["DATABASE_URL"])
        name = f"asicmon_export_{uuid.uuid4().hex[:10]}"
        admin = f"host={parts.hostname} port={parts.port or 5432} user={parts.username or 'postgres'} dbname=postgres"
        if parts.password:
            admin += f" password={parts.password}"
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        env = child_env(DATABASE_URL=parts._replace(path=f"/{name}").geturl())
    else:
        env = child_env(DATABASE_URL=f"sqlite:///{tmp_path / 'old.sqlite3'}")
    env["ASICMON_VAR_DIR"] = str(tmp_path)
    manage(env, "migrate", "traces", "0002_jobs")  # and what it needs: fleet up to 0008
    yield env
    if connection.vendor == "postgresql":
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def run(env, argv, stdin: str = "", check: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run(argv, cwd=ROOT, env=env, input=stdin, capture_output=True, text=True, timeout=300)
    if check:
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    return done


def manage(env, *args, check: bool = True, **extra) -> subprocess.CompletedProcess:
    return run({**env, **extra}, [sys.executable, "manage.py", *args], check=check)


def python(env, script: str, stdin: str = ""):
    return json.loads(run(env, [sys.executable, "-c", script], stdin).stdout.strip().splitlines()[-1])


def history(now: float) -> dict:
    """Two hours of raw samples a minute apart for two devices (and one gone), 1-minute
    rollups for the two hours before them (and some overlapping them), hourly rollups for
    the day before those."""
    raw_start, minute_start = now - 2 * 3600, now - 4 * 3600
    rows = {"fleet_sample": [], "fleet_sample_minute": [], "fleet_sample_hour": []}
    for i in range(120):
        t = raw_start + 60 * i
        rows["fleet_sample"] += [["a", "temperature_c", t, 40 + i % 7 + 0.25], ["a", "power_w", t, 300 + i],
                                 ["b", "temperature_c", t, 30.5 + i % 3], ["gone", "temperature_c", t, 99.0]]
    for i in range(150):  # the last 30 overlap the raw samples: left to them
        t = minute_start + 60 * i
        rows["fleet_sample_minute"].append(["a", "temperature_c", t, 10.0, 20 + i % 5, 30.0, 12])
    for i in range(24):
        t = minute_start - 3600 * (24 - i)
        rows["fleet_sample_hour"].append(["a", "temperature_c", t, 1.0, 5 + i, 9.0, 720])
    hours = sorted({int(t // 3600 * 3600) for _, _, t, _ in rows["fleet_sample"]})
    return {"rows": rows, "hours": hours[:-1], "partition": True}  # the last hour: in the default


def test_the_migration_refuses_to_drop_history_unexported_and_drops_it_when_told(old_database):
    spec = history(float(int(time.time()) // 3600 * 3600))
    python(old_database, INSERT, json.dumps(spec))
    before = python(old_database, TABLES_LEFT)
    assert before == {"fleet_sample": 480, "fleet_sample_hour": 24, "fleet_sample_minute": 150}

    refused = manage(old_database, "migrate", check=False)
    assert refused.returncode != 0
    message = refused.stderr
    assert "CommandError: Migration fleet.0009 drops the PostgreSQL samples tables" in message, message[-2000:]
    assert "fleet_sample, fleet_sample_minute, fleet_sample_hour hold history not copied" in message
    assert "python manage.py export_samples" in message and "ASICMON_DROP_SAMPLES=1" in message
    assert "Traceback" not in message
    assert python(old_database, TABLES_LEFT) == before  # nothing changed

    manage(old_database, "migrate", ASICMON_DROP_SAMPLES="1")
    assert python(old_database, TABLES_LEFT) == {}


def test_export_copies_the_samples_to_the_store_and_then_the_migration_drops_them(old_database, own_tsdb_labels):
    now = float(int(time.time()) // 3600 * 3600)
    spec = history(now)
    ids = python(old_database, INSERT, json.dumps(spec))

    done = manage(old_database, "export_samples", "--batch", "100")
    assert "fleet_sample: 360 points exported; 120 rows left out (their device or counter is gone)." in done.stdout
    assert "fleet_sample_minute: 120 points exported." in done.stdout  # those before the raw samples
    assert "fleet_sample_hour: 24 points exported." in done.stdout

    flush(newest=now)
    stored = {}
    for series in raw_samples(now - 30 * 3600, now):
        key = (series.labels["__name__"], series.labels["device"])
        stored.setdefault(key, []).extend(series.points)
        if series.labels["device"] == str(ids["a"]):
            assert {k: series.labels[k] for k in ("host", "serial", "type", "model")} == \
                {"host": "old-host", "serial": "OLD-a", "type": "gpu", "model": "M"}
    rows = spec["rows"]
    a, b = str(ids["a"]), str(ids["b"])
    raw_start = now - 2 * 3600
    want_a = sorted([(t, v) for _, _, t, _, v, _, _ in rows["fleet_sample_hour"]]
                    + [(t, v) for _, _, t, _, v, _, _ in rows["fleet_sample_minute"] if t <= raw_start - 60]
                    + [(t, v) for d, n, t, v in rows["fleet_sample"] if d == "a" and n == "temperature_c"])
    assert stored.keys() == {("asicmon_temperature_c", a), ("asicmon_power_w", a), ("asicmon_temperature_c", b)}
    got_a = sorted(stored[("asicmon_temperature_c", a)])
    assert [t for t, _ in got_a] == [t for t, _ in want_a]
    assert all(math.isclose(g, w, rel_tol=1e-12) for (_, g), (_, w) in zip(got_a, want_a, strict=True))
    assert sorted(stored[("asicmon_power_w", a)]) == [(t, v) for d, n, t, v in rows["fleet_sample"] if n == "power_w"]
    assert len(stored[("asicmon_temperature_c", b)]) == 120

    # A sample written after the export (an old worker still running) is not exported: refused.
    late = {"rows": {"fleet_sample": [["b", "power_w", now + 5, 1.0]]}, "hours": [], "partition": False}
    python(old_database, INSERT, json.dumps(late))
    refused = manage(old_database, "migrate", check=False)
    assert refused.returncode != 0 and "fleet_sample holds history not copied" in refused.stderr
    manage(old_database, "export_samples")  # again: the same points once more, and the late one
    flush(newest=now + 5)
    again = {(s.labels["__name__"], s.labels["device"]): sorted(s.points) for s in raw_samples(now - 30 * 3600, now + 5)}
    assert again[("asicmon_temperature_c", a)] == got_a  # each point once
    assert again[("asicmon_power_w", b)] == [(now + 5, 1.0)]
    manage(old_database, "migrate")
    assert python(old_database, TABLES_LEFT) == {}
    manage(old_database, "export_samples")  # nothing left to export: says so, fails nothing
