"""The devices' history, read from the time-series store: the one place that turns a device,
counter names and datetimes into the PromQL reads of `fleet.tsdb.reads`, for the device page,
the samples API, the metrics beside a trace and a job's device health.

Every function here raises `TsdbUnavailable` when the store is down or slow and `TsdbError`
when it refuses a query: pages and the trace and job analyses show "history unavailable"
(`unavailable`) rather than fail, the API answers 503 / 502 (dashboard/middleware.py).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from django.conf import settings

from fleet import tsdb
from fleet.tsdb import TsdbError, TsdbUnavailable, reads
from fleet.tsdb.reads import TooManyPoints
from fleet.tsdb.series import series_counters

__all__ = ["TooManyPoints", "TsdbError", "TsdbUnavailable", "api_points", "api_resolution", "chart_step", "read", "stats", "unavailable"]

# The samples API's resolutions: the step of its points (None: every sample), and what `auto`
# picks by the range's length.
API_STEPS = {"raw": None, "1m": 60, "1h": 3600}
RAW_MAX_SPAN = timedelta(hours=2)
MINUTE_MAX_SPAN = timedelta(days=2)
RAW_STATS_MAX_POLLS = reads.MAX_RAW_POINTS  # a window this short gets its statistics from raw samples


def _series(counters) -> dict[str, str]:
    """Counter name -> series name, for the counters that have a time series."""
    names = dict(series_counters())
    return {name: names[name] for name in counters if name in names}


def _device(device_id: int) -> dict[str, str]:
    return {"device": str(device_id)}


def chart_step(since: datetime, until: datetime) -> int | None:
    """None (raw samples) or the band step, in seconds, for a chart of [since, until]."""
    return reads.chart_step((until - since).total_seconds(), settings.POLL_INTERVAL)


def read(device_id: int, counters: list[str], since: datetime, until: datetime, step: int | None = None,
         *, count: bool = False, limit: int | None = None) -> dict[str, list[tuple]]:
    """The counters of a device in [since, until], oldest first: name -> [(epoch, value)]
    for ``step`` None, else [(epoch, mean, min, max)] a point per step (``count``: and the
    number of samples). A counter without a series, or without samples, maps to []."""
    metrics = _series(counters)
    start, end = since.timestamp(), until.timestamp()
    if step is None:
        found = reads.raw_points(tsdb.client(), metrics, _device(device_id), start, end,
                                 interval_s=settings.POLL_INTERVAL, limit=limit)
    else:
        found = reads.bands(tsdb.client(), metrics, _device(device_id), start, end, step, count=count, limit=limit)
    return {name: found.get(name, []) for name in counters}


def stats(device_id: int, counters: list[str], since: datetime, until: datetime) -> dict[str, dict[str, float]]:
    """min, mean, max and n of each counter's samples in [since, until], for the counters
    that have samples there: from the raw samples of a short window, else from the store."""
    span = (until - since).total_seconds()
    if span / settings.POLL_INTERVAL > RAW_STATS_MAX_POLLS:
        return reads.window_stats(tsdb.client(), _series(counters), _device(device_id), since.timestamp(), until.timestamp())
    out = {}
    for name, points in read(device_id, counters, since, until).items():
        values = [p[1] for p in points]
        if values:
            out[name] = {"min": min(values), "mean": sum(values) / len(values), "max": max(values), "n": len(values)}
    return out


def api_resolution(since: datetime, until: datetime) -> str:
    """What ``resolution=auto`` means: raw up to 2 hours, 1-minute bands up to 2 days, then 1-hour."""
    span = until - since
    return "raw" if span <= RAW_MAX_SPAN else "1m" if span <= MINUTE_MAX_SPAN else "1h"


def api_points(device_id: int, counter: str, since: datetime, until: datetime, resolution: str, limit: int) -> list[list]:
    """One counter's points for the API, the latest ``limit`` of the range: [iso_time, value]
    raw, or [iso_time, mean, min, max, count] per step, the time ending the step. A raw read
    looks back at most reads.MAX_POINTS polls from ``until``."""
    step = API_STEPS[resolution]
    if step is None:
        since = max(since, until - timedelta(seconds=reads.MAX_POINTS * settings.POLL_INTERVAL))
    points = read(device_id, [counter], since, until, step, count=True, limit=limit)[counter]
    if step is None:
        return [[_iso(t), value] for t, value in points]
    return [[_iso(t), mean, low, high, round(n)] for t, mean, low, high, n in points]


def _iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, tz=UTC).isoformat()


def unavailable(exc: TsdbError) -> str:
    """What a page says when the history cannot be read."""
    if isinstance(exc, TsdbUnavailable):
        return f"History unavailable: the time-series store at {settings.TSDB_URL} is not answering ({exc})."
    return f"History unavailable: the time-series store refused the query ({exc})."
