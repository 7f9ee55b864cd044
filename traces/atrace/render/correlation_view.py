"""The correlation view: launch-to-start latency, bound/idle states over time, idle gaps.

Built once from :func:`traces.atrace.analysis.correlation.correlate` and stored; the page
draws the launch latency histogram, a stacked chart of the share of each state (device-bound,
device-busy, host-bound, idle) in ``bins`` equal slices of the trace, and the idle gaps of
each accelerator stream.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..analysis.correlation import Correlation, correlate
from ..model.stats import us
from ..model.trace import Trace

STATES = ("device_bound", "device_busy", "host_bound", "idle")


def correlation_view(
    trace: Trace, corr: Correlation | None = None, *, bins: int, launched_by: int | None = None
) -> dict[str, Any]:
    """The view, its states over time in ``bins`` slices, listing at most ``launched_by``
    (host operator, device operator) pairs (None: all)."""
    c = corr if corr is not None else correlate(trace)
    base = c.to_dict(top=launched_by, max_intervals=0)
    base.pop("intervals")
    gaps = base.pop("bubbles")
    return {
        **base,
        "states_over_time": states_over_time(c.intervals, trace.span(), bins),
        "idle_gaps": gaps,
    }


def states_over_time(intervals: list[tuple[int, int, str]], span: tuple[int, int], bins: int) -> dict[str, Any]:
    """Share of each state in each of ``bins`` equal slices of ``span``."""
    t0, t1 = span
    edges = np.linspace(t0, t1, bins + 1) if t1 > t0 else np.array([t0, t0 + 1.0])
    width = np.diff(edges)
    out: dict[str, Any] = {"edges_us": [us(x) for x in edges]}
    for state in STATES:
        runs = [(a, b) for a, b, s in intervals if s == state]
        starts = np.array([a for a, _ in runs], np.float64)
        ends = np.array([b for _, b in runs], np.float64)
        out[state] = np.round(np.diff(_covered_before(starts, ends, edges)) / width, 4).tolist()
    return out


def _covered_before(starts: np.ndarray, ends: np.ndarray, x: np.ndarray) -> np.ndarray:
    """For sorted disjoint intervals: how much of them lies before each point of ``x``."""
    if not len(starts):
        return np.zeros(len(x))
    lengths = ends - starts
    done = np.concatenate([[0.0], np.cumsum(lengths)])
    k = np.searchsorted(starts, x, "right")  # intervals starting at or before x
    last = np.maximum(k - 1, 0)
    partial = np.where(k > 0, np.clip(x - starts[last], 0, lengths[last]), 0.0)
    return done[last] + partial
