"""Reading samples back from the time-series store with PromQL (Django-free).

A device's counters over a range come back in one of two shapes:

- **raw**: every sample, ``(t, value)``, from one range-vector instant query
  (``{__name__=~"a|b",device="7"}[range]``). Only for ranges short enough to hold a bounded
  number of polls (`raw_points` refuses more than `MAX_POINTS` a series).
- **bands**: a point per `step`, ``(t, mean, min, max)`` (and the count of samples when
  asked), computed by the store from ``avg_over_time``/``min_over_time``/``max_over_time``
  (``count_over_time``) over the step ending at ``t``, the window ``(t - step, t]`` —
  so that a long range never brings its raw samples into Python. Every counter and
  statistic of one read is one PromQL expression (their results told apart by a
  ``band`` label), hence one round trip; the series of one counter are aggregated into one,
  so a device that moved to another host (a new ``host`` label) still reads as one line.

On VictoriaMetrics the mean, min and max of a band come from its ``rollup()`` (MetricsQL), one
pass over the samples instead of three; a store that refuses it (Prometheus, Mimir, Thanos)
is asked the portable way, and remembered.

`chart_step` picks the shape of a range for a chart about `CHART_POINTS` pixels wide.
Band points sit on multiples of their step (what VictoriaMetrics aligns to anyway), and band
steps are whole minutes: VictoriaMetrics replaces the points of a shorter step that fall
within its ``-search.latencyOffset`` of now by older ones.

Errors are the client's: `TsdbUnavailable` (the store is down or slow: history is
unavailable, a state callers show) and `TsdbError` (it refused the query).
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Iterable

from fleet.tsdb.client import Client, TsdbError, TsdbUnavailable
from fleet.tsdb.series import selector

CHART_POINTS = 600  # a device chart is about 600 px wide: about a point per pixel
MAX_RAW_POINTS = 1000  # a chart draws raw samples while its range holds at most this many polls
MIN_STEP_S = 60  # band steps are whole minutes, at least one
MAX_STEPS_PER_QUERY = 10_000  # Prometheus answers at most 11,000 points a series per query_range
MAX_POINTS = 100_000  # a series' points in one read, whatever the caller asks: no read runs for minutes
STATS = {"mean": "avg", "min": "min", "max": "max", "count": "count"}  # statistic -> PromQL *_over_time
AGGREGATE = {"mean": "avg", "min": "min", "max": "max", "count": "sum"}  # across a counter's series
_STAT_OF_ROLLUP = {"avg": "mean", "min": "min", "max": "max"}  # VictoriaMetrics' rollup label -> statistic
_KEY = re.compile(r"[A-Za-z0-9_:.-]+")
_METRIC = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")


class TooManyPoints(ValueError):  # noqa: N818 (a refusal, said in its message)
    """A read would return more points than `MAX_POINTS` a series: narrow the range or widen the step."""


def chart_step(span_s: float, interval_s: float, points: int = CHART_POINTS) -> int | None:
    """The step to draw a range of ``span_s`` seconds polled every ``interval_s``: None for
    raw samples (at most MAX_RAW_POINTS polls), else whole minutes giving about ``points``
    points."""
    if span_s / interval_s <= MAX_RAW_POINTS:
        return None
    return max(MIN_STEP_S, math.ceil(span_s / points / 60) * 60)


def names_selector(metrics: Iterable[str], labels: dict[str, str], extra: str | None = None) -> str:
    """A selector of several series names with the same labels (and the TSDB_LABELS)."""
    names = sorted(set(metrics))
    for name in names:
        if not _METRIC.fullmatch(name):
            raise ValueError(f"{name!r} is not a series name")
    inside = selector("", extra=extra, **labels)[1:-1]
    return "{" + ",".join(part for part in (f'__name__=~"{"|".join(names)}"', inside) if part) + "}"


def _duration(seconds: float) -> str:
    """A PromQL duration, to the millisecond."""
    ms = max(1, round(seconds * 1000))
    return f"{ms // 1000}s" if ms % 1000 == 0 else f"{ms}ms"


# --- Raw samples ---------------------------------------------------------------------------

def raw_points(client: Client, metrics: dict[str, str], labels: dict[str, str], start: float, end: float,
               *, interval_s: float, extra: str | None = None, limit: int | None = None) -> dict[str, list[tuple]]:
    """Every sample of the series ``metrics`` (key -> series name) with ``labels`` in
    [start, end], oldest first: key -> [(t, value)]; the latest ``limit`` of each when given.
    Refuses (TooManyPoints) a range holding more than MAX_POINTS polls of ``interval_s``."""
    out: dict[str, list[tuple]] = {key: [] for key in metrics}
    if not metrics or end < start:
        return out
    polls = (end - start) / interval_s
    if polls > MAX_POINTS:
        raise TooManyPoints(
            f"{end - start:.0f} s of raw samples every {interval_s:g} s is {polls:,.0f} points a series; "
            f"at most {MAX_POINTS:,}: shorten the range or read bands"
        )
    promql = f"{names_selector(metrics.values(), labels, extra)}[{_duration(end - start + 0.001)}]"
    key_of = {metric: key for key, metric in metrics.items()}
    merged: dict[str, dict[float, float]] = defaultdict(dict)
    for found in client.query(promql, at=end):
        key = key_of.get(found.labels.get("__name__", ""))
        if key is not None:
            merged[key].update((t, v) for t, v in found.points if start <= t <= end)
    for key, points in merged.items():
        out[key] = sorted(points.items())[-limit:] if limit else sorted(points.items())
    return out


# --- Bands ---------------------------------------------------------------------------------

def band_expression(selectors: dict[str, str], window: float, stats: Iterable[str] = ("mean", "min", "max")) -> str:
    """One PromQL expression for the bands of several selectors (key -> selector): for each
    key and statistic, the statistic of the key's samples in the ``window`` seconds before
    each point, across all of the key's series (a device that moved host has two), labelled
    band="<key>/<statistic>". Each statistic is one pass over the samples (the store's
    cost grows with them): where two series of a key share a window, the mean is the mean
    of their means."""
    duration = _duration(window)
    parts = []
    for key, chosen in selectors.items():
        if not _KEY.fullmatch(key):
            raise ValueError(f"{key!r} is not a band key (letters, digits, _ : . -)")
        for stat in stats:
            inner = f"{AGGREGATE[stat]}({STATS[stat]}_over_time({chosen}[{duration}]))"
            parts.append(f'label_replace({inner}, "band", "{key}/{stat}", "", "")')
    return " or ".join(parts)


def aligned(start: float, end: float, step: float) -> tuple[float, float]:
    """The first and last multiples of ``step`` whose windows (t - step, t] meet [start, end]."""
    return math.ceil(start / step) * step, math.ceil(end / step) * step


def bands(client: Client, metrics: dict[str, str], labels: dict[str, str], start: float, end: float, step: float,
          *, extra: str | None = None, count: bool = False, limit: int | None = None) -> dict[str, list[tuple]]:
    """Per step, the statistics of the samples of each series in ``metrics`` (key -> series
    name) with ``labels``: key -> [(t, mean, min, max)] (``count``: (t, mean, min, max,
    count)), oldest first, t a multiple of ``step`` ending the window it sums up; only the
    latest ``limit`` steps when given. Computed by the store; queried in chunks of at most
    MAX_STEPS_PER_QUERY points."""
    out: dict[str, list[tuple]] = {key: [] for key in metrics}
    if not metrics or end < start:
        return out
    if step < 1:
        raise ValueError(f"a band step is at least 1 s, not {step:g}")
    first, last = aligned(start, end, step)
    if limit:
        first = max(first, last - (limit - 1) * step)
    steps = round((last - first) / step) + 1
    if steps > MAX_POINTS:
        raise TooManyPoints(
            f"{end - start:.0f} s at a {step:g} s step is {steps:,} points a series; at most {MAX_POINTS:,}: "
            "shorten the range or widen the step"
        )
    stats = ("mean", "min", "max", "count") if count else ("mean", "min", "max")
    # A window a millisecond short of the step: (t - step, t] on every store, for samples
    # stamped to the millisecond (Prometheus 2 includes both ends of a range, VictoriaMetrics
    # only the later one), so that a sample falls in one band only.
    values = _band_values(client, metrics, labels, extra, step - 0.001, stats, (first, last, step))
    for key, by_time in values.items():
        if key in out:
            out[key] = [(t, *(row[s] for s in stats)) for t, row in sorted(by_time.items()) if len(row) == len(stats)]
    return out


# Read URLs of stores that refused `rollup()`: asked with the portable expression from then on.
_NO_ROLLUP: set[str] = set()


def _band_values(client: Client, metrics: dict[str, str], labels: dict[str, str], extra: str | None, window: float,
                 stats: tuple[str, ...], span: tuple[float, float, float]) -> dict[str, dict[float, dict[str, float]]]:
    """`_stats_by_time` of the bands over `span` (first, last, step): from VictoriaMetrics'
    ``rollup()`` where the store takes it (mean, min and max: one pass over the samples), else
    from the portable expression (a pass per statistic)."""
    refused = False
    if "count" not in stats and client.read_url not in _NO_ROLLUP:
        keys_of = defaultdict(list)
        for key, metric in metrics.items():
            keys_of[metric].append(key)
        try:
            promql = rollup_expression(metrics.values(), labels, extra, window)
            return _stats_by_time(client, promql, *span, keys_of=keys_of)
        except TsdbUnavailable:
            raise
        except TsdbError:  # perhaps not MetricsQL: asked the portable way
            refused = True
    selectors = {key: selector(metric, extra=extra, **labels) for key, metric in metrics.items()}
    values = _stats_by_time(client, band_expression(selectors, window, stats), *span)
    if refused:  # the store answers PromQL but not rollup(): not asked again
        _NO_ROLLUP.add(client.read_url)
    return values


def rollup_expression(metrics: Iterable[str], labels: dict[str, str], extra: str | None, window: float) -> str:
    """The MetricsQL of `band_expression`'s mean, min and max: one VictoriaMetrics ``rollup()``
    of every series of `metrics` with `labels` (each series' min, max and mean, labelled
    rollup="min"/"max"/"avg", named as it is stored); a key's several series are combined
    by `_stats_by_time`, as the portable expression combines them in the store."""
    return f"rollup({names_selector(metrics, labels, extra)}[{_duration(window)}]) keep_metric_names"


def _stats_by_time(client: Client, promql: str, first: float, last: float, step: float,
                   keys_of: dict[str, list[str]] | None = None) -> dict[str, dict[float, dict[str, float]]]:
    """key -> t -> statistic -> value of a band expression, queried in chunks of at most
    MAX_STEPS_PER_QUERY points: of `band_expression` (key and statistic in its ``band``
    label), or with `keys_of` (series name -> keys) of `rollup_expression`, a key's series
    combined: the min of their minima, the max of their maxima, the mean of their means."""
    found: dict[str, dict[float, dict[str, list[float]]]] = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
    chunk = first
    while chunk <= last:
        chunk_end = min(last, chunk + (MAX_STEPS_PER_QUERY - 1) * step)
        for series in client.query_range(promql, chunk, chunk_end, step):
            labels = series.labels
            if keys_of is None:
                key, _, stat = labels.get("band", "").rpartition("/")
                keys = [key]
            else:
                keys, stat = keys_of.get(labels.get("__name__", ""), []), _STAT_OF_ROLLUP.get(labels.get("rollup", ""))
            if stat is None:
                continue
            for key in keys:
                for t, v in series.points:
                    found[key][t][stat].append(v)
        chunk = chunk_end + step
    combine = {"mean": lambda vs: sum(vs) / len(vs), "min": min, "max": max, "count": sum}
    return {key: {t: {stat: combine[stat](vs) for stat, vs in row.items()} for t, row in by_time.items()}
            for key, by_time in found.items()}


# --- Statistics over a window --------------------------------------------------------------

def window_stats(client: Client, metrics: dict[str, str], labels: dict[str, str], start: float, end: float,
                 *, extra: str | None = None) -> dict[str, dict[str, float]]:
    """min, mean, max and count (n) of each series' samples in [start, end]: key -> stats,
    for the keys that have samples there. One instant query at ``end`` over a range a
    millisecond longer than [start, end] (VictoriaMetrics leaves out the range's first
    instant; Prometheus 2 would include a sample a millisecond before ``start``)."""
    if not metrics or end < start:
        return {}
    span = end - start + 0.001
    selectors = {key: selector(metric, extra=extra, **labels) for key, metric in metrics.items()}
    found: dict[str, dict[str, float]] = defaultdict(dict)
    for series in client.query(band_expression(selectors, span, ("mean", "min", "max", "count")), at=end):
        key, _, stat = series.labels.get("band", "").rpartition("/")
        found[key]["n" if stat == "count" else stat] = series.points[-1][1]
    return {key: stats for key, stats in found.items() if key in metrics and len(stats) == 4}


# --- Fleet-wide ----------------------------------------------------------------------------

def fleet_quantile(client: Client, metric: str, q: float, start: float, end: float, step: float,
                   *, by: tuple[str, ...] = ("type",), labels: dict[str, str] | None = None,
                   extra: str | None = None) -> dict[tuple[str, ...], list[tuple[float, float]]]:
    """The ``q`` quantile of a series across the fleet's devices, grouped by the labels
    ``by`` (device type by default), every ``step`` from start to end: group -> [(t, value)].
    Each point is the quantile of the devices' latest samples at t (the store's lookback).
    It costs the store a read of the range's samples and a sort of the devices' values at
    each point: fewer points cost less (benchmarks/bench_history.py)."""
    if not 0 <= q <= 1:
        raise ValueError(f"a quantile is between 0 and 1, not {q:g}")
    steps = (end - start) / step + 1
    if steps > MAX_STEPS_PER_QUERY:
        raise TooManyPoints(f"{steps:,.0f} points; at most {MAX_STEPS_PER_QUERY:,}: widen the step")
    promql = f"quantile by ({', '.join(by)}) ({q:g}, {selector(metric, extra=extra, **(labels or {}))})"
    return {tuple(s.labels.get(name, "") for name in by): s.points for s in client.query_range(promql, start, end, step)}


def fleet_quantile_over(client: Client, metric: str, q: float, start: float, end: float,
                        *, by: tuple[str, ...] = ("type",), labels: dict[str, str] | None = None,
                        extra: str | None = None) -> dict[tuple[str, ...], float]:
    """One ``q`` quantile per group over the whole range: the quantile across devices of each
    device's ``q`` quantile over [start, end] (quantile_over_time: reads every sample)."""
    if not 0 <= q <= 1:
        raise ValueError(f"a quantile is between 0 and 1, not {q:g}")
    chosen = selector(metric, extra=extra, **(labels or {}))
    promql = f"quantile by ({', '.join(by)}) ({q:g}, quantile_over_time({q:g}, {chosen}[{_duration(end - start)}]))"
    return {tuple(s.labels.get(name, "") for name in by): s.points[-1][1] for s in client.query(promql, at=end)}
