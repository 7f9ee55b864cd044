"""Small vectorised helpers shared by the analyses."""

from __future__ import annotations

import numpy as np

US = 1000.0  # ns per microsecond


def us(ns) -> float:
    """Nanoseconds to microseconds, as a plain float (JSON-friendly)."""
    return round(float(ns) / US, 3)


def distribution(values_ns: np.ndarray) -> dict[str, float | int]:
    """count, mean, p50, p95, p99, max (in us) of a set of durations."""
    v = np.asarray(values_ns, dtype=np.float64)
    if not len(v):
        return {"count": 0, "mean_us": 0.0, "p50_us": 0.0, "p95_us": 0.0, "p99_us": 0.0, "max_us": 0.0}
    p50, p95, p99 = np.percentile(v, [50, 95, 99])
    return {
        "count": len(v),
        "mean_us": us(v.mean()),
        "p50_us": us(p50),
        "p95_us": us(p95),
        "p99_us": us(p99),
        "max_us": us(v.max()),
    }


def group_percentiles(groups: np.ndarray, values: np.ndarray, n_groups: int, qs: list[float]) -> np.ndarray:
    """Per group (0..n_groups-1) percentiles (linear interpolation) -> shape (n_groups, len(qs))."""
    return group_stats(groups, values, n_groups, qs)[0]


def group_stats(groups: np.ndarray, values: np.ndarray, n_groups: int, qs: list[float]) -> tuple[np.ndarray, np.ndarray]:
    """Per group: the percentiles ``qs`` (shape (n_groups, len(qs))) and the maximum (0.0
    for an empty group), from one sort."""
    out = np.zeros((n_groups, len(qs)))
    top = np.zeros(n_groups)
    if not len(values):
        return out, top
    g, v = _sorted_by_group(groups, values, n_groups)
    v = v.astype(np.float64)
    starts = np.searchsorted(g, np.arange(n_groups), "left")
    counts = np.searchsorted(g, np.arange(n_groups), "right") - starts
    has = counts > 0
    for j, q in enumerate(qs):
        pos = (counts - 1) * q
        lo = np.floor(pos).astype(np.int64)
        hi = np.ceil(pos).astype(np.int64)
        frac = pos - lo
        lo_i = np.where(has, starts + lo, 0)
        hi_i = np.where(has, starts + hi, 0)
        out[:, j] = np.where(has, v[lo_i] + (v[hi_i] - v[lo_i]) * frac, 0.0)
    top[has] = v[(starts + counts - 1)[has]]
    return out, top


def _sorted_by_group(groups: np.ndarray, values: np.ndarray, n_groups: int) -> tuple[np.ndarray, np.ndarray]:
    """(groups, values) sorted by group, then value. Non-negative integers that fit sort
    as one int64 key (group * (max + 1) + value), quicker than sorting by two keys."""
    if values.dtype.kind in "iu" and groups.dtype.kind in "iu" and len(values):
        low, high = int(values.min()), int(values.max())
        if low >= 0 and int(groups.min()) >= 0 and n_groups * (high + 1) < (1 << 62):
            key = np.sort(groups.astype(np.int64) * (high + 1) + values)
            return key // (high + 1), key % (high + 1)
    order = np.lexsort((values, groups))
    return groups[order], values[order]


def merge_intervals(start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Union of intervals, as sorted disjoint (start, end) arrays."""
    if not len(start):
        return start.astype(np.int64), end.astype(np.int64)
    order = np.argsort(start, kind="stable")
    s = start[order]
    e = np.maximum.accumulate(end[order])
    # A new run starts where an interval begins after everything before it ended.
    new = np.ones(len(s), bool)
    new[1:] = s[1:] > e[:-1]
    rs = s[new]
    # e is a running maximum: a run's end is its last interval's.
    last = np.empty(len(rs), np.int64)
    last[:-1] = np.flatnonzero(new)[1:] - 1
    last[-1] = len(e) - 1
    return rs, e[last].astype(np.int64)


def covered_before(starts: np.ndarray, ends: np.ndarray, t: np.ndarray) -> np.ndarray:
    """For sorted disjoint intervals: per time in ``t``, how much of them lies before it.
    The time they cover inside a window [a, b) is ``covered_before(b) - covered_before(a)``:
    two binary searches a window, however many intervals there are."""
    t = np.asarray(t)
    if not len(starts):
        return np.zeros(t.shape, np.int64)
    total = np.concatenate([[0], np.cumsum(ends - starts)])
    i = np.searchsorted(starts, t, "right")  # intervals that begin by t
    return total[i] - np.where(i > 0, np.maximum(ends[np.maximum(i - 1, 0)] - t, 0), 0)


def covered(starts: np.ndarray, ends: np.ndarray, t: np.ndarray) -> np.ndarray:
    """For sorted disjoint intervals: whether each time in ``t`` lies inside one."""
    if not len(starts):
        return np.zeros(len(t), bool)
    k = np.searchsorted(starts, t, "right") - 1
    ok = k >= 0
    return ok & (t < np.where(ok, ends[np.maximum(k, 0)], 0))
