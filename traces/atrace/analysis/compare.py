"""Comparison of two traces (two software versions, two devices, before and after a fix)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import EmptyTraceError
from ..model.kinds import runtime_name
from ..model.stats import us
from ..model.trace import Trace
from .breakdown import Breakdown, operator_breakdown
from .critical_path import CriticalPath, critical_path, steps

#: What ``compare`` compares by default: operators, runtime calls and device work. Python
#: frames (keyed by file and line) and annotations only drown the operators' changes.
OPERATOR_KINDS = ("host_op", "runtime", "kernel", "memcpy", "memset", "comm")


def _by_op(bd: Breakdown, scale: float, kinds: tuple[str, ...] | None = OPERATOR_KINDS
           ) -> dict[tuple[str, str], dict[str, float]]:
    out: dict[tuple[str, str], dict[str, float]] = {}
    for g, (side, kind, op) in enumerate(bd.keys):
        if kinds is not None and kind not in kinds:
            continue
        if kind == "runtime":
            op = runtime_name(op)  # hipLaunchKernel and cudaLaunchKernel are the same call
        row = out.setdefault((side, op), {"count": 0, "total": 0.0, "self": 0.0})
        row["count"] += int(bd.count[g]) * scale
        row["total"] += float(bd.total_ns[g]) * scale
        row["self"] += float(bd.self_total_ns[g]) * scale
    return out


@dataclass
class Comparison:
    labels: tuple[str, str]
    span_ns: tuple[int, int]
    rows: list[dict[str, Any]]
    new: list[dict[str, Any]]
    vanished: list[dict[str, Any]]
    path: dict[str, Any] | None
    normalized_by: str = "trace"  # "step": totals are per step (the traces hold different step counts)

    def to_dict(self, top: int | None = None) -> dict[str, Any]:
        return {
            "labels": list(self.labels),
            "normalized_by": self.normalized_by,
            "span_us": [us(self.span_ns[0]), us(self.span_ns[1])],
            "rows": self.rows[:top] if top else self.rows,
            "new": self.new,
            "vanished": self.vanished,
            "critical_path": self.path,
        }


def _path_by_op(cp: CriticalPath) -> dict[tuple[str, str], float]:
    return {(r["side"], r["op"]): r["time_us"] for r in cp.by_op()}


def compare(
    a: Trace, b: Trace, *, labels: tuple[str, str] = ("A", "B"), with_critical_path: bool = True,
    kinds: tuple[str, ...] | None = OPERATOR_KINDS,
) -> Comparison:
    """Per operator type deltas (B minus A) ranked by impact, new and vanished operators,
    and the difference of the critical paths. ``kinds`` (kind names) limits what is
    compared; the default is operators, runtime calls and device work; None compares all."""
    bd_a, bd_b = operator_breakdown(a), operator_breakdown(b)
    steps_a, steps_b = len(steps(a)), len(steps(b))
    per_step = bool(steps_a and steps_b) and steps_a != steps_b
    ops_a = _by_op(bd_a, 1.0 / steps_a if per_step else 1.0, kinds)
    ops_b = _by_op(bd_b, 1.0 / steps_b if per_step else 1.0, kinds)
    span_a = max(bd_a.span_ns / (steps_a if per_step else 1), 1)
    rows, new, vanished = [], [], []
    zero = {"count": 0, "total": 0.0, "self": 0.0}
    for key in sorted(set(ops_a) | set(ops_b)):
        ra, rb = ops_a.get(key, zero), ops_b.get(key, zero)
        side, op = key
        delta = rb["total"] - ra["total"]
        row = {
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
        }
        rows.append(row)
        if key not in ops_a:
            new.append({"op": op, "side": side, "count": round(rb["count"], 3), "total_us": us(rb["total"])})
        elif key not in ops_b:
            vanished.append({"op": op, "side": side, "count": round(ra["count"], 3), "total_us": us(ra["total"])})
    rows.sort(key=lambda r: -abs(r["delta_us"]))
    path = None
    if with_critical_path:
        try:
            if steps_a and steps_b:  # one step in the middle of each trace: comparable lengths
                sa, sb = steps(a), steps(b)
                cp_a = critical_path(a, step=sa[len(sa) // 2])
                cp_b = critical_path(b, step=sb[len(sb) // 2])
            else:
                cp_a, cp_b = critical_path(a), critical_path(b)
        except EmptyTraceError:
            cp_a = cp_b = None
        if cp_a is not None and cp_b is not None:
            pa, pb = _path_by_op(cp_a), _path_by_op(cp_b)
            diff = []
            for key in set(pa) | set(pb):
                ta, tb = pa.get(key, 0.0), pb.get(key, 0.0)
                diff.append({"op": key[1], "side": key[0], "path_a_us": ta, "path_b_us": tb,
                             "delta_us": round(tb - ta, 3)})
            diff.sort(key=lambda r: -abs(r["delta_us"]))
            path = {
                "scope": "one step" if steps_a and steps_b else "whole trace",
                "length_a_us": us(cp_a.length_ns),
                "length_b_us": us(cp_b.length_ns),
                "delta_us": us(cp_b.length_ns - cp_a.length_ns),
                "by_op": diff,
                "only_in_a": [r["op"] for r in diff if r["path_b_us"] == 0][:50],
                "only_in_b": [r["op"] for r in diff if r["path_a_us"] == 0][:50],
            }
    return Comparison(labels, (bd_a.span_ns, bd_b.span_ns), rows, new, vanished, path,
                      "step" if per_step else "trace")
