"""Writing and reading the time-series table.

Writes are batched and idempotent: a sample is keyed by (device, counter, cycle
timestamp), and a key that exists already is left as it is. On PostgreSQL:

- a writer that names its ``scope`` (a poll shard, an agent's host) claims a marker row
  (scope, cycle) in the same transaction and, if the marker is new, COPies the batch
  straight into the (partitioned) table: the fastest way in (benchmarks/bench_fleet10k.py).
  A repeat of the cycle finds the marker and adds nothing. Should the batch still meet a
  key already stored (another writer's, e.g. hosts that moved between shards), the COPY
  is undone and the batch goes the safe way below;
- otherwise the batch is COPied into a staging table and inserted with one
  INSERT … ON CONFLICT DO NOTHING.

Before either, the hourly partitions the batch falls in are created if missing. On SQLite
a batch is one executemany in one transaction.
"""

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

import psycopg
from django.conf import settings
from django.db import IntegrityError, connection, transaction

from fleet import partitions
from fleet.asicmon import CATALOGUE
from fleet.models import Counter, Sample

# Kinds of catalogue counters that are numbers worth a time series.
SERIES_KINDS = {"gauge", "counter"}


@dataclass(frozen=True, slots=True)
class SampleRow:
    device_id: int
    counter_id: int
    ts: datetime
    value: float


def mirror_catalogue(**kwargs) -> None:
    """Copy the Asicmon catalogue into the Counter table (run after every migrate)."""
    Counter.objects.bulk_create(
        [
            Counter(name=c.name, unit=c.unit, kind=c.kind, description=c.description[:255])
            for c in CATALOGUE.values()
        ],
        ignore_conflicts=True,
    )


def counter_ids() -> dict[str, int]:
    """Counter name -> id, one small query; mirrors the catalogue if a counter is missing."""
    ids = dict(Counter.objects.values_list("name", "id"))
    if len(ids) < len(CATALOGUE):
        mirror_catalogue()
        ids = dict(Counter.objects.values_list("name", "id"))
    return ids


def series_counter_names() -> list[str]:
    return sorted(name for name, c in CATALOGUE.items() if c.kind in SERIES_KINDS)


def rows_from_snapshot(device_id: int, ts: datetime, snapshot: dict, ids: dict[str, int]) -> list[SampleRow]:
    rows = []
    for name, value in snapshot.items():
        if name not in ids or CATALOGUE[name].kind not in SERIES_KINDS:
            continue
        if isinstance(value, bool) or not isinstance(value, int | float):
            continue
        rows.append(SampleRow(device_id, ids[name], ts, float(value)))
    return rows


def write_samples(rows: Iterable[SampleRow], scope: str = "") -> int:
    """Store a batch, skipping keys already there. Returns the number of rows sent, or 0
    when ``scope`` has already written this batch's cycle."""
    rows = list(rows)
    if not rows:
        return 0
    table = connection.ops.quote_name(Sample._meta.db_table)
    with transaction.atomic(), connection.cursor() as cursor:
        if connection.vendor != "postgresql":
            adapt = connection.ops.adapt_datetimefield_value
            cursor.executemany(
                f"INSERT OR IGNORE INTO {table} (device_id, counter_id, ts, value) VALUES (%s, %s, %s, %s)",
                [(r.device_id, r.counter_id, adapt(r.ts), r.value) for r in rows],
            )
            return len(rows)
        if not settings.SAMPLES_SYNCHRONOUS_COMMIT:
            # Opt-in: a server crash may lose the last fraction of a second of samples
            # (their marker with them: nothing half-written). Worth it only where the
            # WAL's disk is slow to flush; no gain measured on the development machine.
            cursor.execute("SET LOCAL synchronous_commit = off")
        instants = {r.ts for r in rows}
        partitions.ensure(cursor.cursor, Sample._meta.db_table, instants)
        if not scope:
            _copy_then_insert(cursor.cursor, table, rows)
            return len(rows)
        if not _claim(cursor.cursor, scope, instants):
            return 0
        try:
            with transaction.atomic():
                _copy_direct(cursor.cursor, table, rows)
        except (IntegrityError, psycopg.errors.UniqueViolation):
            _copy_then_insert(cursor.cursor, table, rows)
    return len(rows)


def _claim(cursor, scope: str, instants: set[datetime]) -> bool:
    """Write the markers (scope, ts); False if any of them was there already (a repeat)."""
    cursor.execute(
        "INSERT INTO fleet_sample_batch (scope, ts) SELECT %s, unnest(%s::timestamptz[]) ON CONFLICT DO NOTHING",
        [scope, sorted(instants)],
    )
    return cursor.rowcount == len(instants)


def _copy_direct(cursor, table: str, rows: list[SampleRow]) -> None:
    """COPY the batch into the table in PostgreSQL's binary format: the server parses no
    text, and psycopg packs each row in C (benchmarks/bench_fleet10k.py: about twice the
    rate of text, a quarter of the writer's CPU)."""
    with cursor.copy(f"COPY {table} (device_id, counter_id, ts, value) FROM STDIN (FORMAT BINARY)") as copy:
        copy.set_types(["int8", "int2", "timestamptz", "float8"])
        for r in rows:
            copy.write_row((r.device_id, r.counter_id, r.ts, r.value))


def _copy_then_insert(cursor, table: str, rows: list[SampleRow]) -> None:
    """COPY the batch into a per-connection staging table (emptied at commit), then one
    INSERT … ON CONFLICT DO NOTHING."""
    cursor.execute(
        "CREATE TEMP TABLE IF NOT EXISTS sample_staging "
        "(device_id bigint, counter_id smallint, ts timestamptz, value float8) ON COMMIT DELETE ROWS"
    )
    with cursor.copy("COPY sample_staging (device_id, counter_id, ts, value) FROM STDIN") as copy:
        for r in rows:
            copy.write_row((r.device_id, r.counter_id, r.ts, r.value))
    cursor.execute(
        f"INSERT INTO {table} (device_id, counter_id, ts, value) "
        "SELECT device_id, counter_id, ts, value FROM sample_staging ON CONFLICT DO NOTHING"
    )


def read_series(device_id: int, counter_id: int, since: datetime, until: datetime, limit: int):
    """(ts, value) pairs of one device's counter in [since, until], oldest first; with more
    than ``limit`` in the range, the latest ``limit`` of them."""
    latest = list(
        Sample.objects.filter(device_id=device_id, counter_id=counter_id, ts__gte=since, ts__lte=until)
        .order_by("-ts")
        .values_list("ts", "value")[:limit]
    )
    latest.reverse()
    return latest
