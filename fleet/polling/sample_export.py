"""Moving the samples PostgreSQL held before the time-series store into the store
(``manage.py export_samples``; docs/deploy.md, "Moving history out of PostgreSQL").

The old tables have no models any more; they stay in the database until migration
``0009_samples_leave_postgresql`` drops them, and are read here with plain SQL, in batches
in primary-key order (device, counter, time), each batch one remote write to the store:

- every raw sample of ``fleet_sample``;
- the 1-minute means of ``fleet_sample_minute`` that end before the oldest raw sample, and
  the 1-hour means of ``fleet_sample_hour`` that end before the oldest 1-minute mean: the
  history only the rollups kept, at their resolution (a point at the start of each period);

as the series a poll writes: the counter's series name, the device's labels as they are
today (host, device, serial, type, model) and TSDB_LABELS. A row of a device no longer in
the database, or of a counter without a series, has no labels to go under: it is counted
and left out. When every table is done, a marker per table (``fleet_sample_batch``, scope
``export:<table>``, the time of its newest row) tells the migration what was exported;
it refuses to drop a table holding rows newer than its marker. Running the export again
writes the same points again: the store keeps one sample per series and timestamp.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from django.db import connection, transaction

from fleet.models import Counter, Device
from fleet.tsdb import Client, TsdbUnavailable
from fleet.tsdb.series import parse_labels, series_counters
from fleet.tsdb.writes import _field, _labels, _varint, compress

# Table -> (the value column exported, the length of one row's period).
TABLES = {
    "fleet_sample": ("value", timedelta(0)),
    "fleet_sample_minute": ('"mean"', timedelta(minutes=1)),
    "fleet_sample_hour": ('"mean"', timedelta(hours=1)),
}
MARKER_SCOPE = "export:{table}"  # read by migration 0009
RETRIES = 5  # per batch, while the store does not answer (1, 2, 4, 8, 16 s apart)


@dataclass
class ExportResult:
    points: dict[str, int] = field(default_factory=dict)  # exported, by table
    left_out: dict[str, int] = field(default_factory=dict)  # rows with no series to go in, by table
    requests: int = 0


def sample_tables() -> list[str]:
    """The old samples tables this database still has."""
    with connection.cursor() as cursor:
        present = set(connection.introspection.table_names(cursor))
    return [table for table in TABLES if table in present]


def _epoch_ms(value) -> int:
    """A timestamp column's value (a datetime, or SQLite's text) in epoch milliseconds."""
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return round(value.timestamp() * 1000)


def _oldest(table: str) -> datetime | None:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT min(ts) FROM {table}")  # noqa: S608 (a table of ours)
        value = cursor.fetchone()[0]
    if value is None:
        return None
    ms = _epoch_ms(value)
    return datetime.fromtimestamp(ms / 1000, tz=UTC)


def _cutoffs(tables: list[str]) -> dict[str, datetime | None]:
    """Per table, the time its exported rows must end by (None: all of them): a rollup is
    exported where no finer table has rows."""
    cutoffs: dict[str, datetime | None] = {}
    finer: datetime | None = None
    for table in TABLES:
        if table not in tables:
            continue
        cutoffs[table] = None if finer is None else finer - TABLES[table][1]
        oldest = _oldest(table)
        if oldest is not None:
            finer = oldest if finer is None else min(finer, oldest)
    return cutoffs


def _rows(table: str, cutoff: datetime | None, batch: int) -> Iterator[list[tuple]]:
    """The table's (device_id, counter_id, ts, value) rows up to ``cutoff`` in primary-key
    order, ``batch`` at a time (keyset pagination: each batch one indexed range)."""
    value = TABLES[table][0]
    adapt = connection.ops.adapt_datetimefield_value
    after = None
    while True:
        where, args = [], []
        if cutoff is not None:
            where.append("ts <= %s")
            args.append(adapt(cutoff))
        if after is not None:
            where.append("(device_id, counter_id, ts) > (%s, %s, %s)")
            args += [after[0], after[1], after[2]]
        sql = (f"SELECT device_id, counter_id, ts, {value} FROM {table}"  # noqa: S608 (names of ours)
               f"{' WHERE ' + ' AND '.join(where) if where else ''} ORDER BY device_id, counter_id, ts LIMIT %s")
        with connection.cursor() as cursor:
            cursor.execute(sql, [*args, batch])
            rows = cursor.fetchall()
        if not rows:
            return
        yield rows
        after = rows[-1][:3]


def encode_series(series: list[tuple[dict[str, str], list[tuple[int, float]]]]) -> bytes:
    """A Prometheus remote-write WriteRequest (uncompressed) of several samples a series:
    [(labels, [(epoch ms, value)])], labels sorted by name as the stores expect."""
    out = []
    for labels, points in series:
        body = _labels(labels) + b"".join(_field(2, b"\x09" + struct.pack("<d", v) + b"\x10" + _varint(ms)) for ms, v in points)
        out.append(_field(1, body))
    return b"".join(out)


def _send(client: Client, body: bytes, sleep: Callable[[float], None] = time.sleep) -> None:
    for attempt in range(RETRIES + 1):
        try:
            client.write(body, timeout_s=60)
            return
        except TsdbUnavailable:
            if attempt == RETRIES:
                raise
            sleep(2**attempt)


def export(client: Client, *, extra: str = "", batch: int = 50_000,
           progress: Callable[[str], None] = lambda line: None) -> ExportResult:
    """Copy the old tables' samples to the store (see the module's notes); then mark them exported."""
    tables = sample_tables()
    series_of = dict(series_counters())
    names = {cid: series_of.get(name) for cid, name in Counter.objects.values_list("id", "name")}
    labels_of = {
        d["id"]: {"host": d["host__name"], "device": str(d["id"]), "serial": d["serial"], "type": d["device_type"],
                  "model": d["model"]}
        for d in Device.objects.values("id", "host__name", "serial", "device_type", "model")
    }
    added = dict(parse_labels(extra))
    result = ExportResult()
    newest: dict[str, object] = {}
    for table, cutoff in _cutoffs(tables).items():
        result.points[table] = result.left_out[table] = 0
        for rows in _rows(table, cutoff, batch):
            runs: dict[tuple[int, int], list[tuple[int, float]]] = {}
            for device_id, counter_id, ts, value in rows:
                runs.setdefault((device_id, counter_id), []).append((_epoch_ms(ts), float(value)))
            series = []
            for (device_id, counter_id), points in runs.items():
                name, labels = names.get(counter_id), labels_of.get(device_id)
                if name is None or labels is None:
                    result.left_out[table] += len(points)
                    continue
                series.append(({"__name__": name, **labels, **added}, points))
                result.points[table] += len(points)
            if series:
                _send(client, compress(encode_series(series)))
                result.requests += 1
            progress(f"{table}: {result.points[table]:,} points sent")
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT max(ts) FROM {table}")  # noqa: S608 (a table of ours)
            newest[table] = cursor.fetchone()[0]
    _mark(newest)
    return result


def _mark(newest: dict[str, object]) -> None:
    """Record, per table, the newest row the export covered (migration 0009 reads it)."""
    with transaction.atomic(), connection.cursor() as cursor:
        for table, ts in newest.items():
            scope = MARKER_SCOPE.format(table=table)
            cursor.execute("DELETE FROM fleet_sample_batch WHERE scope = %s", [scope])
            if ts is not None:
                cursor.execute("INSERT INTO fleet_sample_batch (scope, ts) VALUES (%s, %s)", [scope, ts])
