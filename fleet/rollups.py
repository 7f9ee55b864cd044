"""Rollups of samples (1-minute and 1-hour min/mean/max/count per device and counter),
retention of samples and rollups, and reading a series at the resolution its range needs.

`roll_up` is run every minute by beat: it aggregates the minutes completed since the last
run from the raw samples, then the hours they complete from the minutes. It is
idempotent: how far it got is a marker row in `fleet_sample_batch` (scope "rollup:1m"),
and a period computed again from its source replaces what was there.
"""

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Max
from django.utils import timezone

from fleet import partitions, samples
from fleet.models import Sample, SampleBatch, SampleHour, SampleMinute

MINUTE, HOUR = timedelta(minutes=1), timedelta(hours=1)
CHUNK = {MINUTE: timedelta(hours=1), HOUR: timedelta(days=1)}  # the range of one statement

# The resolution a range is shown at: raw up to RAW_MAX_SPAN (1,440 points at a 5 s
# interval), 1-minute means up to MINUTE_MAX_SPAN (2,880 points), then 1-hour means; a
# range that starts before the raw (or 1-minute) retention goes to the next resolution.
RAW_MAX_SPAN = timedelta(hours=2)
MINUTE_MAX_SPAN = timedelta(days=2)
RESOLUTIONS = ("raw", "1m", "1h")
MODELS = {"1m": SampleMinute, "1h": SampleHour}
STEP_SECONDS = {"1m": 60.0, "1h": 3600.0}


def floor(ts: datetime, period: timedelta) -> datetime:
    step = period.total_seconds()
    return datetime.fromtimestamp(ts.timestamp() // step * step, tz=UTC)


def _bucket(period: timedelta) -> str:
    if connection.vendor == "postgresql":
        return f"date_bin('{int(period.total_seconds())} seconds', ts, '1970-01-01 00:00:00+00')"
    return "strftime('%%Y-%%m-%%d %%H:%%M:00', ts)" if period == MINUTE else "strftime('%%Y-%%m-%%d %%H:00:00', ts)"


UPSERT = (
    'ON CONFLICT (device_id, counter_id, ts) DO UPDATE SET "min" = excluded."min", '
    '"mean" = excluded."mean", "max" = excluded."max", "count" = excluded."count"'
)


def _aggregate(period: timedelta, start: datetime, end: datetime) -> int:
    """Roll [start, end) of the source into ``period`` buckets; returns the rows written."""
    bucket = _bucket(period)
    if period == MINUTE:
        target, source = SampleMinute._meta.db_table, Sample._meta.db_table
        values = 'min(value), avg(value), max(value), count(*)'
    else:
        target, source = SampleHour._meta.db_table, SampleMinute._meta.db_table
        values = 'min("min"), sum("mean" * "count") / sum("count"), max("max"), sum("count")'
    adapt = connection.ops.adapt_datetimefield_value
    with transaction.atomic(), connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SET LOCAL synchronous_commit = off")  # a crash loses nothing a rerun cannot redo
            if target in partitions.WIDTHS:
                partitions.ensure(cursor.cursor, target, [start, end - period])
        cursor.execute(
            f'INSERT INTO {target} (device_id, counter_id, ts, "min", "mean", "max", "count") '
            f"SELECT device_id, counter_id, {bucket}, {values} FROM {source} "
            f"WHERE ts >= %s AND ts < %s GROUP BY device_id, counter_id, {bucket} {UPSERT}",
            [adapt(start), adapt(end)],
        )
        return cursor.rowcount


@dataclass
class RollupResult:
    minutes: tuple[datetime, datetime] | None = None  # the range rolled into 1-minute rows
    hours: tuple[datetime, datetime] | None = None
    rows: dict[str, int] = field(default_factory=lambda: {"1m": 0, "1h": 0})


def roll_up(now: datetime | None = None) -> RollupResult:
    """Roll every minute completed since the last run, then every hour those minutes
    complete; each period once. A minute counts as complete when the poll slots of all
    its cycles have passed (a poll writes within its slot, or its cycle is a gap). The
    first run starts at the raw retention."""
    now = now or timezone.now()
    result = RollupResult()
    oldest = floor(now - timedelta(hours=settings.SAMPLE_RETENTION_HOURS), HOUR)
    end = floor(now - timedelta(seconds=2 * settings.POLL_INTERVAL), MINUTE)
    last = _resume_point("1m")
    start = max(last + MINUTE if last else oldest, oldest)
    if start >= end:
        return result
    result.minutes = (start, end)
    result.rows["1m"] = _aggregate_range(MINUTE, start, end)
    _mark("1m", end - MINUTE)
    hours = (floor(start, HOUR), floor(end, HOUR))
    if hours[0] < hours[1]:
        result.hours = hours
        result.rows["1h"] = _aggregate_range(HOUR, *hours)
    return result


def _aggregate_range(period: timedelta, start: datetime, end: datetime) -> int:
    """`_aggregate` over [start, end) in chunks (one statement per hour of minutes, per
    day of hours): a first run after a long stop stays in bounded statements."""
    rows = 0
    chunk = start
    while chunk < end:
        stop = min(chunk + CHUNK[period], end)
        rows += _aggregate(period, chunk, stop)
        chunk = stop
    return rows


def _resume_point(label: str) -> datetime | None:
    return SampleBatch.objects.filter(scope=f"rollup:{label}").aggregate(last=Max("ts"))["last"]


def _mark(label: str, last: datetime) -> None:
    SampleBatch.objects.get_or_create(scope=f"rollup:{label}", ts=last)
    SampleBatch.objects.filter(scope=f"rollup:{label}", ts__lt=last).delete()


# --- Retention -------------------------------------------------------------------------

@dataclass
class PruneResult:
    dropped: list[str]  # the partitions dropped whole (PostgreSQL)
    deleted: dict[str, int]  # rows deleted, by table


def prune(now: datetime | None = None, raw_hours: int | None = None) -> PruneResult:
    """Apply retention: raw samples (and poll markers) past SAMPLE_RETENTION_HOURS,
    1-minute rollups past SAMPLE_MINUTE_RETENTION_DAYS, 1-hour ones past
    SAMPLE_HOUR_RETENTION_DAYS. On PostgreSQL whole partitions are dropped; a partition
    is dropped once all of it is past retention, so nothing within retention is lost and
    raw samples are kept up to an hour longer (1-minute rollups a day). Also creates the
    next partitions ahead of the writes."""
    now = now or timezone.now()
    cutoffs = {
        Sample: now - timedelta(hours=raw_hours or settings.SAMPLE_RETENTION_HOURS),
        SampleMinute: now - timedelta(days=settings.SAMPLE_MINUTE_RETENTION_DAYS),
        SampleHour: now - timedelta(days=settings.SAMPLE_HOUR_RETENTION_DAYS),
    }
    result = PruneResult([], {})
    for model, cutoff in cutoffs.items():  # one short transaction per table
        table = model._meta.db_table
        if connection.vendor == "postgresql" and table in partitions.WIDTHS:
            with transaction.atomic(), connection.cursor() as cursor:
                partitions.ensure_ahead(cursor.cursor, table, now, 2)
                dropped, deleted = partitions.drop_before(cursor.cursor, table, cutoff)
            result.dropped += dropped
        else:
            deleted, _ = model.objects.filter(ts__lt=cutoff).delete()
        result.deleted[table] = deleted
    markers = SampleBatch.objects.filter(ts__lt=cutoffs[Sample]).exclude(scope__startswith="rollup:")
    result.deleted[SampleBatch._meta.db_table], _ = markers.delete()
    return result


# --- Reading ---------------------------------------------------------------------------

def choose_resolution(since: datetime, until: datetime, now: datetime | None = None) -> str:
    now = now or timezone.now()
    span = until - since
    if span <= RAW_MAX_SPAN and since >= now - timedelta(hours=settings.SAMPLE_RETENTION_HOURS):
        return "raw"
    if span <= MINUTE_MAX_SPAN and since >= now - timedelta(days=settings.SAMPLE_MINUTE_RETENTION_DAYS):
        return "1m"
    return "1h"


def read_rollups(resolution: str, device_id: int, counter_ids: list[int], since: datetime, until: datetime, limit: int):
    """(counter_id, ts, min, mean, max, count) of one device's counters in [since, until],
    oldest first; with more than ``limit`` in the range, the latest ``limit``."""
    rows = list(
        MODELS[resolution].objects.filter(device_id=device_id, counter_id__in=counter_ids, ts__gte=since, ts__lte=until)
        .order_by("-ts", "counter_id")
        .values_list("counter_id", "ts", "min", "mean", "max", "count")[:limit]
    )
    rows.reverse()
    return rows


def read_points(resolution: str, device_id: int, counter_id: int, since: datetime, until: datetime, limit: int) -> list:
    """One counter's series for the API: [iso_time, value] raw, [iso_time, mean, min, max,
    count] from rollups; oldest first, the latest ``limit`` of the range."""
    if resolution == "raw":
        return [[ts.isoformat(), value] for ts, value in samples.read_series(device_id, counter_id, since, until, limit)]
    rows = read_rollups(resolution, device_id, [counter_id], since, until, limit)
    return [[ts.isoformat(), mean, low, high, count] for _, ts, low, mean, high, count in rows]
