"""Time partitions of the large tables on PostgreSQL (SQLite keeps plain tables).

`fleet_sample` is range-partitioned on `ts` by hour and `fleet_sample_minute` by day; each
also has a DEFAULT partition, so that a row whose partition does not exist yet is stored
rather than refused. Partitions are created ahead by the maintenance task and on demand
before a write (`ensure`); retention drops whole partitions (`drop_before`) instead of
deleting rows. Functions here take a psycopg cursor inside the caller's transaction.
"""

from collections.abc import Iterable
from datetime import UTC, datetime, timedelta

import psycopg
from django.db import transaction

# Table -> width of one partition.
WIDTHS = {"fleet_sample": timedelta(hours=1), "fleet_sample_minute": timedelta(days=1)}
NAME_FORMATS = {"fleet_sample": "%Y%m%d%H", "fleet_sample_minute": "%Y%m%d"}
# Serialises the creation of partitions between processes (any constant of our own).
LOCK_KEY = 0x4153_4D50  # "ASMP"


def start_of(table: str, ts: datetime) -> datetime:
    """The start of the partition that ``ts`` falls in (UTC)."""
    width = WIDTHS[table]
    epoch = ts.astimezone(UTC).timestamp()
    return datetime.fromtimestamp(epoch // width.total_seconds() * width.total_seconds(), tz=UTC)


def partition_name(table: str, start: datetime) -> str:
    return f"{table}_p{start:{NAME_FORMATS[table]}}"


def ensure(cursor, table: str, instants: Iterable[datetime]) -> list[str]:
    """Create the partitions that hold ``instants`` if missing; returns those created.

    A missing partition is built as a plain table, given the rows of its range that the
    DEFAULT partition holds, then attached: attaching fails if the default still has rows
    of the range, and holds only a brief lock on the parent.
    """
    starts = sorted({start_of(table, ts) for ts in instants})
    missing = [s for s in starts if not _exists(cursor, partition_name(table, s))]
    if not missing:
        return []
    cursor.execute("SELECT pg_advisory_xact_lock(%s)", [LOCK_KEY])
    created = []
    for start in missing:
        name = partition_name(table, start)
        try:
            with transaction.atomic():  # a savepoint: another process may have made it meanwhile
                _create(cursor, table, name, start, start + WIDTHS[table])
        except (psycopg.errors.DuplicateTable, psycopg.errors.UniqueViolation):
            continue
        created.append(name)
    return created


def _create(cursor, table: str, name: str, start: datetime, end: datetime) -> None:
    cursor.execute(f'CREATE TABLE "{name}" (LIKE "{table}" INCLUDING DEFAULTS)')
    cursor.execute(
        f'WITH moved AS (DELETE FROM "{table}_default" WHERE ts >= %s AND ts < %s RETURNING *) '
        f'INSERT INTO "{name}" SELECT * FROM moved',
        [start, end],
    )
    bounds = f"FROM ('{start.isoformat()}') TO ('{end.isoformat()}')"
    cursor.execute(f'ALTER TABLE "{table}" ATTACH PARTITION "{name}" FOR VALUES {bounds}')


def ensure_ahead(cursor, table: str, now: datetime, count: int) -> list[str]:
    """The partition holding ``now`` and the ``count`` after it."""
    width = WIDTHS[table]
    return ensure(cursor, table, [now + i * width for i in range(count + 1)])


def _exists(cursor, name: str) -> bool:
    cursor.execute("SELECT to_regclass(%s) IS NOT NULL", [f'"{name}"'])
    return cursor.fetchone()[0]


def partitions(cursor, table: str) -> list[tuple[str, datetime | None, datetime | None]]:
    """(name, start, end) of every partition, oldest first; the default's bounds are None."""
    cursor.execute(
        "SELECT c.relname, pg_get_expr(c.relpartbound, c.oid) FROM pg_inherits i "
        "JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = %s::regclass",
        [f'"{table}"'],
    )
    found = []
    for name, bound in cursor.fetchall():
        if bound == "DEFAULT":
            found.append((name, None, None))
            continue
        # FOR VALUES FROM ('2026-11-22 07:00:00+00') TO ('2026-11-22 08:00:00+00')
        low, high = (part.split("'")[1] for part in bound.split(" TO "))
        found.append((name, datetime.fromisoformat(low), datetime.fromisoformat(high)))
    return sorted(found, key=lambda p: (p[1] is not None, p[1] or datetime.min.replace(tzinfo=UTC)))


def drop_before(cursor, table: str, cutoff: datetime) -> tuple[list[str], int]:
    """Drop the partitions that end at or before ``cutoff`` and delete the default's rows
    older than it (normally none). Rows of the partition that straddles the cutoff stay
    until the whole partition is past it. Returns (dropped names, rows deleted)."""
    dropped = []
    for name, _start, end in partitions(cursor, table):
        if end is not None and end <= cutoff:
            cursor.execute(f'DROP TABLE "{name}"')
            dropped.append(name)
    cursor.execute(f'DELETE FROM "{table}_default" WHERE ts < %s', [cutoff])
    return dropped, cursor.rowcount


def is_partitioned(cursor, table: str) -> bool:
    cursor.execute("SELECT EXISTS (SELECT 1 FROM pg_partitioned_table WHERE partrelid = to_regclass(%s))", [f'"{table}"'])
    return cursor.fetchone()[0]


# --- The migration: convert a plain table into a partitioned one, and back --------------

def partition_table(cursor, table: str, key_columns: str, ts_index: str) -> None:
    """Replace plain ``table`` by a partitioned table of the same columns, primary key
    (``key_columns``) and a BRIN index ``ts_index`` on ts, moving its rows over.

    The copy holds a lock on the table for as long as it takes: see docs/deploy.md,
    "Upgrades", for a large table.
    """
    old = f"{table}_unpartitioned"
    cursor.execute(f'ALTER TABLE "{table}" RENAME TO "{old}"')
    cursor.execute(f'ALTER INDEX "{table}_pkey" RENAME TO "{old}_pkey"')
    cursor.execute(f'ALTER INDEX "{ts_index}" RENAME TO "{ts_index}_unpartitioned"')
    cursor.execute(f'CREATE TABLE "{table}" (LIKE "{old}" INCLUDING DEFAULTS, PRIMARY KEY ({key_columns})) PARTITION BY RANGE (ts)')
    # BRIN: ts grows with insertion order, so a tiny index serves "every device over a
    # time range" (rollups, retention of the default) at almost no cost per insert.
    cursor.execute(f'CREATE INDEX "{ts_index}" ON "{table}" USING brin (ts)')
    cursor.execute(f'CREATE TABLE "{table}_default" PARTITION OF "{table}" DEFAULT')
    cursor.execute(f'SELECT DISTINCT date_bin(%s, ts, \'1970-01-01\') FROM "{old}"', [WIDTHS[table]])
    starts = [row[0] for row in cursor.fetchall()]
    ensure(cursor, table, [*starts, datetime.now(tz=UTC)])
    cursor.execute(f'INSERT INTO "{table}" SELECT * FROM "{old}"')
    cursor.execute(f'DROP TABLE "{old}"')


def unpartition_table(cursor, table: str, key_columns: str, ts_index: str) -> None:
    """The reverse of `partition_table`: one plain table with a btree index on ts."""
    old = f"{table}_partitioned"
    cursor.execute(f'ALTER TABLE "{table}" RENAME TO "{old}"')
    cursor.execute(f'ALTER INDEX "{table}_pkey" RENAME TO "{old}_pkey"')
    cursor.execute(f'ALTER INDEX "{ts_index}" RENAME TO "{ts_index}_partitioned"')
    cursor.execute(f'CREATE TABLE "{table}" (LIKE "{old}" INCLUDING DEFAULTS, PRIMARY KEY ({key_columns}))')
    cursor.execute(f'CREATE INDEX "{ts_index}" ON "{table}" (ts)')
    cursor.execute(f'INSERT INTO "{table}" SELECT * FROM "{old}"')
    cursor.execute(f'DROP TABLE "{old}"')
