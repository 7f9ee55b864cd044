"""Steps and the critical-path table: each operator's share of the path, the slack of the rest.

:func:`step_list` finds the trace's steps (``ProfilerStep#N`` of PyTorch, ``step#N`` of the
emulator) in one vectorised pass. :func:`path_table` turns a :class:`CriticalPath` into the
table the trace page shows next to the timeline: per operator type (and side), its time on
the path and share of the path's length, how many of its instances lie on the path, and,
for the instances off it, their least and median slack (how much longer they could take
before the path grows). :func:`path_tables` computes it once for the whole trace and for
up to ``max_steps`` steps holding up to ``max_step_events`` events together, each on a slice
of the trace around that step, so the worker stores them all and a request for ``?step=``
only reads. Every limit is the caller's (the trace page passes its own); None: no limit.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

import numpy as np

from ...errors import EmptyTraceError
from ...model.links import launch_pairs
from ...model.stats import group_percentiles, us
from ...model.trace import ArgStore, Trace
from .critical_path import CriticalPath, critical_path

_STEP_NAME = re.compile(r"^(ProfilerStep#|step#)(\d+)$")


def step_list(trace: Trace) -> list[dict[str, Any]]:
    """The trace's steps in time order: name, number, start, end, duration."""
    strings = trace.strings.strings
    ids = [i for i, s in enumerate(strings) if _STEP_NAME.match(s)]
    if not ids:
        return []
    hits = np.flatnonzero(np.isin(trace.name, np.array(ids, np.int32)) & trace.is_slice)
    # The longest slice of each name is the step (a name may repeat on several threads).
    hits = hits[np.lexsort((-trace.dur[hits], trace.name[hits]))]
    _, first = np.unique(trace.name[hits], return_index=True)
    steps = hits[first]
    steps = steps[np.argsort(trace.ts[steps], kind="stable")]
    out = []
    for e in steps.tolist():
        name = strings[trace.name[e]]
        out.append(
            {
                "name": name,
                "number": int(_STEP_NAME.match(name).group(2)),
                "start_us": us(trace.ts[e]),
                "end_us": us(trace.end[e]),
                "dur_us": us(trace.dur[e]),
            }
        )
    return out


def path_table(
    cp: CriticalPath,
    *,
    index_map: np.ndarray | None = None,
    max_rows: int | None = None,
    least_slack: int | None = None,
) -> dict[str, Any]:
    """The critical-path table of one path (``index_map`` maps a sliced trace's events back):
    at most ``max_rows`` operator rows and ``least_slack`` events of least slack."""
    t = cp.trace
    strings = t.strings.strings
    sel = cp.selected
    marked = np.zeros(len(t), bool)
    marked[cp.events] = True
    on_path = marked[sel]
    n_str = len(strings) + 1
    key = t.on_device.astype(np.int64) * n_str + t.op  # (side, operator) per event: small ints
    uniq, lookup = _compact(key[sel], 2 * n_str)
    group = lookup[key[sel]]
    path_ns = np.bincount(lookup[key[cp.events]], weights=cp.on_path_ns, minlength=len(uniq)).astype(np.float64)
    off = ~on_path
    off_group = group[off]
    off_slack = cp.slack_ns[off].astype(np.float64)
    min_slack = np.full(len(uniq), np.inf)
    np.minimum.at(min_slack, off_group, off_slack)
    median = group_percentiles(off_group, off_slack, len(uniq), [0.5])[:, 0]
    n_on = np.bincount(group[on_path], minlength=len(uniq))
    n_off = np.bincount(off_group, minlength=len(uniq))
    rows = []
    for g in np.lexsort((min_slack, -path_ns)).tolist()[:max_rows]:
        side, op = divmod(int(uniq[g]), n_str)
        rows.append(
            {
                "op": strings[op],
                "side": "device" if side else "host",
                "on_path": int(n_on[g]),
                "off_path": int(n_off[g]),
                "path_us": us(path_ns[g]),
                "share": round(float(path_ns[g]) / cp.length_ns, 6) if cp.length_ns else 0.0,
                "min_slack_us": us(min_slack[g]) if n_off[g] else None,
                "median_slack_us": us(median[g]) if n_off[g] else None,
            }
        )
    summary = cp.to_dict(max_steps=0, top_slack=len(cp.selected) if least_slack is None else least_slack)
    for row in summary["slack"]["least_slack_off_path"]:
        row["index"] = _global(row["index"], index_map)
    return {
        "length_us": summary["length_us"],
        "window_us": summary["window_us"],
        "by_side": summary["by_side"],
        "events_on_path": int(on_path.sum()),
        "operators": len(uniq),
        "rows_truncated": max_rows is not None and len(uniq) > max_rows,
        "rows": rows,
        "least_slack": summary["slack"]["least_slack_off_path"],
    }


def _compact(keys: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """The distinct values of ``keys`` (ints in [0, n)), sorted, and a table mapping each
    value to its place among them: a counting pass, no sort or hash of the keys."""
    present = np.zeros(n, bool)
    present[keys] = True
    uniq = np.flatnonzero(present)
    lookup = np.full(n, -1, np.int64)
    lookup[uniq] = np.arange(len(uniq))
    return uniq, lookup


def _global(index: int, index_map: np.ndarray | None) -> int:
    return int(index_map[index]) if index_map is not None else int(index)


class _NoArgs:
    """Stands for the argument store in a slice of a trace that no one reads args from."""

    def take(self, indices: np.ndarray) -> ArgStore:
        return ArgStore(b"", np.zeros(len(indices) + 1, np.int64))


def _spread(n: int, limit: int) -> list[int]:
    """At most ``limit`` positions of 0..n-1, evenly spread, first and last included."""
    if n <= limit:
        return list(range(n))
    return sorted(set(np.linspace(0, n - 1, limit).round().astype(int).tolist()))


def path_tables(
    trace: Trace,
    whole: CriticalPath | None = None,
    *,
    max_steps: int | None = None,
    max_step_events: int | None = None,
    max_rows: int | None = None,
    least_slack: int | None = None,
) -> dict[str, Any]:
    """The critical-path table of the whole trace and of some of its steps.

    Steps are taken middle first, then first and last, then evenly spread, while they number
    at most ``max_steps`` and hold at most ``max_step_events`` events together (the middle
    one always), so the per-step paths cost a fraction of the whole trace's. Each step's
    path is computed on the events that start in it plus the device work they launch.
    ``valid_steps`` lists exactly the steps computed, in time order.
    """
    whole = whole if whole is not None else critical_path(trace)
    steps = step_list(trace)
    by_start = np.argsort(trace.ts, kind="stable")
    ts_sorted = trace.ts[by_start]
    link = np.full(len(trace), -1, np.int64)
    rt, dev = launch_pairs(trace)
    link[rt] = dev
    light = replace(trace, args=_NoArgs(), _cache={})  # a step's path never reads args
    tables: dict[int, dict[str, Any]] = {}
    budget = float("inf") if max_step_events is None else max_step_events
    for k in _priority(len(steps), len(steps) if max_steps is None else max_steps):
        step = steps[k]
        start, end = _ns(step["start_us"]), _ns(step["end_us"])
        lo, hi = np.searchsorted(ts_sorted, [start, end], "left")
        if tables and hi - lo > budget:
            continue
        inside = by_start[lo:hi]
        launched = link[inside]
        member = np.zeros(len(trace), bool)
        member[inside] = True
        member[launched[launched >= 0]] = True
        part = np.flatnonzero(member)
        budget -= len(part)
        try:
            cp = critical_path(light.take(part), window=(start, end))
        except EmptyTraceError:
            continue
        tables[k] = path_table(cp, index_map=part, max_rows=max_rows, least_slack=least_slack)
    ordered = sorted(tables)
    return {
        "whole": path_table(whole, max_rows=max_rows, least_slack=least_slack),
        "steps": steps,
        "step_paths": {steps[k]["name"]: tables[k] for k in ordered},
        "valid_steps": [steps[k]["name"] for k in ordered],
    }


def _ns(us_value: float) -> int:
    return int(round(us_value * 1000))


def _priority(n: int, limit: int) -> list[int]:
    """Step positions to try: the middle, the first, the last, then evenly spread."""
    if not n:
        return []
    first = [n // 2, 0, n - 1]
    rest = _spread(n, limit)
    out: list[int] = []
    for k in first + rest:
        if k not in out:
            out.append(k)
    return out[:limit]
