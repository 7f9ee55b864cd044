"""Comparison of two traces (two software versions, two devices, before and after a fix).

There is one algorithm, :func:`compare_tables`, and it works on *op tables*: what a
comparison needs of one trace (:func:`op_table`) — per (side, kind, operator type) count,
total and self time, the number of steps, the span, and the critical path of a
representative step (or of the whole trace) by operator. A page comparing two stored
million-event traces must not load them, so the worker keeps one op table per trace;
:func:`compare_traces` builds the op tables of two loaded traces and compares them the same way.

The comparison gives per-step totals when the step counts differ, deltas B minus A ranked by
their impact on the total (or on the critical path), new and vanished operators as tables,
and the difference of the critical paths. At the default operator level Python frames (keyed
by file and line) and annotations are left out, so they cannot drown the operators, and
synchronisation calls — which only wait longer when the device slows — go to a table of
their own (``waits``); ``level="all"`` keeps them all in the ranking.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import EmptyTraceError
from ..model.kinds import runtime_name
from ..model.stats import us
from ..model.trace import Trace
from .breakdown import Breakdown, operator_breakdown
from .paths.critical_path import CriticalPath, critical_path, steps
from .versions import WAIT_NAME

LEVELS = ("operator", "all")
RANKS = ("total", "path")
_SKIPPED_AT_OPERATOR_LEVEL = ("python", "annotation")
#: What :func:`compare_traces` compares by default: operators, runtime calls and device work.
OPERATOR_KINDS = ("host_op", "runtime", "kernel", "memcpy", "memset", "comm")


def op_table(bd: Breakdown, steps: int, path: dict[str, Any] | None, path_scope: str) -> dict[str, Any]:
    """What a comparison needs of one trace (``path``: a :func:`path_table` result, or
    anything with its ``length_us`` and ``rows`` of ``side``, ``op`` and ``path_us``)."""
    return {
        "span_ns": int(bd.span_ns),
        "steps": steps,
        "ops": [
            [side, kind, op, int(bd.count[g]), float(bd.total_ns[g]), float(bd.self_total_ns[g])]
            for g, (side, kind, op) in enumerate(bd.keys)
        ],
        "path": {
            "scope": path_scope,
            "length_us": path["length_us"],
            "by_op": {f"{r['side']}/{r['op']}": r["path_us"] for r in path["rows"]},
        }
        if path
        else None,
    }


def _by_op(table: dict[str, Any], level: str, scale: float) -> dict[tuple[str, str], dict]:
    out: dict[tuple[str, str], dict] = {}
    for side, kind, op, count, total, self_ns in table["ops"]:
        if level == "operator" and kind in _SKIPPED_AT_OPERATOR_LEVEL:
            continue
        wait = kind == "runtime" and bool(WAIT_NAME.search(op))
        row = out.setdefault((side, op), {"count": 0.0, "total": 0.0, "self": 0.0, "wait": wait})
        row["count"] += count * scale
        row["total"] += total * scale
        row["self"] += self_ns * scale
    return out


def compare_tables(
    a: dict[str, Any],
    b: dict[str, Any],
    *,
    labels: tuple[str, str] = ("A", "B"),
    level: str = "operator",
    rank: str = "total",
) -> dict[str, Any]:
    """Per operator type deltas (B minus A), new and vanished operators, path difference."""
    if level not in LEVELS:
        raise ValueError(f"level must be one of {', '.join(LEVELS)}, not {level!r}")
    if rank not in RANKS:
        raise ValueError(f"rank must be one of {', '.join(RANKS)}, not {rank!r}")
    per_step = bool(a["steps"] and b["steps"]) and a["steps"] != b["steps"]
    ops_a = _by_op(a, level, 1.0 / a["steps"] if per_step else 1.0)
    ops_b = _by_op(b, level, 1.0 / b["steps"] if per_step else 1.0)
    span_a = max(a["span_ns"] / (a["steps"] if per_step else 1), 1)
    path = _path_difference(a["path"], b["path"])
    path_delta = {(r["side"], r["op"]): r["delta_us"] for r in path["by_op"]} if path else {}
    rows = [_row(key, ops_a, ops_b, span_a, path_delta) for key in sorted(set(ops_a) | set(ops_b))]
    field = "delta_us" if rank == "total" else "path_delta_us"
    rows.sort(key=lambda r: (-abs(r[field] or 0.0), -abs(r["delta_us"])))
    waits = [r for r in rows if r.pop("wait")]
    if level == "operator":
        rows = [r for r in rows if r not in waits]
    new = [_only(r, "b") for r in rows if (r["side"], r["op"]) not in ops_a]
    vanished = [_only(r, "a") for r in rows if (r["side"], r["op"]) not in ops_b]
    return {
        "labels": list(labels),
        "level": level,
        "ranked_by": rank,
        "normalized_by": "step" if per_step else "trace",
        "span_us": [us(a["span_ns"]), us(b["span_ns"])],
        "total_delta_us": round(sum(r["delta_us"] for r in rows), 3),
        "rows": rows,
        "waits": waits if level == "operator" else [],
        "new": sorted(new, key=lambda r: -r["total_us"]),
        "vanished": sorted(vanished, key=lambda r: -r["total_us"]),
        "critical_path": path,
    }


def _row(key, ops_a, ops_b, span_a: float, path_delta: dict) -> dict[str, Any]:
    zero = {"count": 0.0, "total": 0.0, "self": 0.0, "wait": False}
    ra, rb = ops_a.get(key, zero), ops_b.get(key, zero)
    side, op = key
    delta = rb["total"] - ra["total"]
    return {
        "op": op,
        "side": side,
        "count_a": round(ra["count"], 3),
        "count_b": round(rb["count"], 3),
        "total_a_us": us(ra["total"]),
        "total_b_us": us(rb["total"]),
        "delta_us": us(delta),
        "delta_pct": round(100.0 * delta / ra["total"], 2) if ra["total"] else None,
        "mean_a_us": us(ra["total"] / ra["count"]) if ra["count"] else 0.0,
        "mean_b_us": us(rb["total"] / rb["count"]) if rb["count"] else 0.0,
        "self_delta_us": us(rb["self"] - ra["self"]),
        "impact": round(delta / span_a, 6),
        "path_delta_us": path_delta.get(key),
        "wait": ra["wait"] or rb["wait"],
    }


def _only(row: dict[str, Any], which: str) -> dict[str, Any]:
    return {
        "op": row["op"],
        "side": row["side"],
        "count": row[f"count_{which}"],
        "total_us": row[f"total_{which}_us"],
        "mean_us": row[f"mean_{which}_us"],
    }


def _path_difference(pa: dict | None, pb: dict | None) -> dict[str, Any] | None:
    if not pa or not pb:
        return None
    by_op = []
    for key in sorted(set(pa["by_op"]) | set(pb["by_op"])):
        side, op = key.split("/", 1)
        ta, tb = pa["by_op"].get(key, 0.0), pb["by_op"].get(key, 0.0)
        by_op.append({"op": op, "side": side, "path_a_us": ta, "path_b_us": tb, "delta_us": round(tb - ta, 3)})
    by_op.sort(key=lambda r: -abs(r["delta_us"]))
    return {
        "scope": pa["scope"] if pa["scope"] == pb["scope"] else f"{pa['scope']} / {pb['scope']}",
        "length_a_us": pa["length_us"],
        "length_b_us": pb["length_us"],
        "delta_us": round(pb["length_us"] - pa["length_us"], 3),
        "by_op": by_op,
        "only_in_a": [r["op"] for r in by_op if r["path_b_us"] == 0][:50],
        "only_in_b": [r["op"] for r in by_op if r["path_a_us"] == 0][:50],
    }


@dataclass
class Comparison:
    """Two loaded traces compared: :func:`compare_tables`' answer for their op tables."""

    result: dict[str, Any]

    @property
    def rows(self) -> list[dict[str, Any]]:
        return self.result["rows"]

    def to_dict(self, top: int | None = None) -> dict[str, Any]:
        r = self.result
        return {
            "labels": r["labels"],
            "normalized_by": r["normalized_by"],
            "span_us": r["span_us"],
            "rows": r["rows"][:top] if top else r["rows"],
            "new": r["new"],
            "vanished": r["vanished"],
            "critical_path": r["critical_path"],
        }


def compare_traces(
    a: Trace, b: Trace, *, labels: tuple[str, str] = ("A", "B"), with_critical_path: bool = True,
    kinds: tuple[str, ...] | None = OPERATOR_KINDS,
) -> Comparison:
    """Compare two loaded traces: their op tables, compared by :func:`compare_tables`.

    ``kinds`` (kind names) limits what is compared; the default is operators, runtime calls
    and device work; None compares all. ROCm and CUDA runtime calls compare as one
    (``hipLaunchKernel`` is ``cudaLaunchKernel``). The critical paths compared are those of
    the middle step of each trace when both have steps, else of the whole traces.
    """
    steps_a, steps_b = steps(a), steps(b)
    one_step = bool(steps_a and steps_b)
    paths = _critical_paths(a, b, steps_a, steps_b) if with_critical_path else (None, None)
    scope = "one step" if one_step else "whole trace"
    tables = [
        _trace_table(trace, len(names), path, scope, kinds)
        for trace, names, path in ((a, steps_a, paths[0]), (b, steps_b, paths[1]))
    ]
    return Comparison(compare_tables(*tables, labels=labels, level="all"))


def _critical_paths(a: Trace, b: Trace, steps_a: list[str], steps_b: list[str]):
    """The paths of one step in the middle of each trace (comparable lengths), or of the
    whole traces; (None, None) when either has none."""
    try:
        if steps_a and steps_b:
            return (critical_path(a, step=steps_a[len(steps_a) // 2]),
                    critical_path(b, step=steps_b[len(steps_b) // 2]))
        return critical_path(a), critical_path(b)
    except EmptyTraceError:
        return None, None


def _trace_table(trace: Trace, n_steps: int, path: CriticalPath | None, scope: str,
                 kinds: tuple[str, ...] | None) -> dict[str, Any]:
    """The op table of a loaded trace, of ``kinds`` only, ROCm runtime calls named as CUDA's."""
    on_path = None
    if path is not None:
        on_path = {"length_us": us(path.length_ns),
                   "rows": [{"side": r["side"], "op": r["op"], "path_us": r["time_us"]} for r in path.by_op()]}
    table = op_table(operator_breakdown(trace), n_steps, on_path, scope)
    table["ops"] = [
        [side, kind, runtime_name(op) if kind == "runtime" else op, *figures]
        for side, kind, op, *figures in table["ops"]
        if kinds is None or kind in kinds
    ]
    return table
