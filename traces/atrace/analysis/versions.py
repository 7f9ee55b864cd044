"""Software versions across the fleet: per-operator means per version, regressions flagged.

The worker stores, once per trace, :func:`op_means` — the mean duration of each operator
type (host and device apart, Python frames and annotations left out). For one workload
on one device type, :func:`version_regressions` takes those of many traces with their
software versions, averages each operator per version, and compares each version with the
one before it. A slowdown is flagged when it exceeds both the spread between traces of the
same version (the noise a rerun shows: max minus min of the per-trace means, on either
side) and ``min_change`` of the older mean — so two traces of one version never flag
anything, and a release that really slowed an operator does. Synchronisation calls, which
only wait longer when the device slows, are listed but never flagged.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from ..model.stats import us
from .breakdown import Breakdown

MIN_CHANGE = 0.05  # a slowdown under 5% is never flagged
_SKIPPED_KINDS = ("python", "annotation")
# A synchronisation call waits for the device: it grows when device work slows, and is a
# symptom, not a cause, so it is shown but never flagged.
WAIT_NAME = re.compile(r"synchroni[sz]e|wait", re.IGNORECASE)


def op_means(bd: Breakdown) -> dict[str, dict[str, float]]:
    """``{"side/op": {"mean_us", "count"}}`` of one trace, at the operator level."""
    totals: dict[str, list[float]] = {}
    for g, (side, kind, op) in enumerate(bd.keys):
        if kind in _SKIPPED_KINDS:
            continue
        t = totals.setdefault(f"{side}/{op}", [0.0, 0])
        t[0] += float(bd.total_ns[g])
        t[1] += int(bd.count[g])
    return {
        k: {"mean_us": us(total / n), "count": n, "wait": bool(WAIT_NAME.search(k))}
        for k, (total, n) in totals.items()
        if n
    }


def version_key(version: str) -> tuple:
    """Sort key of a version string: numeric parts as numbers ('2.10' after '2.9')."""
    return tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in re.split(r"[.\-+]", version))


def version_regressions(traces: list[dict[str, Any]], *, min_change: float = MIN_CHANGE) -> dict[str, Any]:
    """Regressions between consecutive software versions.

    ``traces``: ``[{"id", "version", "ops": op_means(...)}]`` of one workload and device
    type. Returns the versions in order, each operator's mean and spread per version, the
    change from each version to the next, and the flagged regressions, largest first.
    """
    versions = sorted({t["version"] for t in traces}, key=version_key)
    per_version = {v: [t for t in traces if t["version"] == v] for v in versions}
    ops = sorted({op for t in traces for op in t["ops"]})
    rows = [_op_row(op, versions, per_version, min_change) for op in ops]
    rows.sort(key=lambda r: (not r["flagged"], -_worst(r)))
    flagged = [
        {"op": r["op"], "side": r["side"], **c}
        for r in rows
        for c in r["changes"]
        if c["flagged"]
    ]
    flagged.sort(key=lambda c: -c["delta_pct"])
    return {
        "versions": versions,
        "traces": {v: [t["id"] for t in per_version[v]] for v in versions},
        "rows": rows,
        "regressions": flagged,
    }


def _worst(row: dict[str, Any]) -> float:
    return max((c["delta_pct"] or 0.0 for c in row["changes"]), default=0.0)


def _op_row(op: str, versions: list[str], per_version: dict, min_change: float) -> dict[str, Any]:
    side, name = op.split("/", 1)
    stats = {}
    for v in versions:
        means = np.array([t["ops"][op]["mean_us"] for t in per_version[v] if op in t["ops"]])
        if len(means):
            stats[v] = {
                "mean_us": round(float(means.mean()), 3),
                "spread_us": round(float(means.max() - means.min()), 3),
                "traces": len(means),
            }
    present = [v for v in versions if v in stats]
    changes = [_change(a, b, stats[a], stats[b], min_change) for a, b in zip(present, present[1:])]
    wait = bool(WAIT_NAME.search(op))
    if wait:
        for c in changes:
            c["flagged"] = False
    return {
        "op": name,
        "side": side,
        "wait": wait,
        "by_version": stats,
        "changes": changes,
        "flagged": any(c["flagged"] for c in changes),
    }


def _change(a: str, b: str, sa: dict, sb: dict, min_change: float) -> dict[str, Any]:
    delta = sb["mean_us"] - sa["mean_us"]
    noise = max(sa["spread_us"], sb["spread_us"])
    pct = 100.0 * delta / sa["mean_us"] if sa["mean_us"] else None
    return {
        "from": a,
        "to": b,
        "delta_us": round(delta, 3),
        "delta_pct": round(pct, 2) if pct is not None else None,
        "noise_us": noise,
        "flagged": bool(delta > noise and pct is not None and pct > 100.0 * min_change),
    }


# -- step time ------------------------------------------------------------------------------
def step_time(steps: list[dict[str, Any]]) -> dict[str, Any] | None:
    """``{"step_us", "steps"}``: the median length of a trace's steps (``step_list``: its
    ``ProfilerStep#N`` / ``step#N`` ranges) and how many there are; None without steps."""
    if not steps:
        return None
    return {"step_us": round(float(np.median([s["dur_us"] for s in steps])), 3), "steps": len(steps)}


def step_regressions(traces: list[dict[str, Any]], ops: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """Step-time changes between consecutive software versions, each flagged when the step
    got slower by more than the noise between captures of one version (the spread of their
    step times: max minus min, the larger of the two versions'). With a single capture of
    each version the noise is unknown and nothing is flagged.

    ``traces``: ``[{"id", "version", "step_us", "steps", "ops": op_means(...)}]``; ``ops``:
    :func:`version_regressions` of the same traces, whose flagged operators of each change
    are named as responsible, ranked by the time per step they added.
    """
    timed = [t for t in traces if t.get("step_us")]
    versions = sorted({t["version"] for t in timed}, key=version_key)
    stats = {}
    for v in versions:
        steps = np.array([t["step_us"] for t in timed if t["version"] == v], float)
        stats[v] = {"mean_us": round(float(steps.mean()), 3), "spread_us": round(float(steps.max() - steps.min()), 3),
                    "captures": len(steps)}
    out = []
    for a, b in zip(versions, versions[1:]):
        sa, sb = stats[a], stats[b]
        delta = sb["mean_us"] - sa["mean_us"]
        known = max(sa["captures"], sb["captures"]) >= 2
        noise = max(sa["spread_us"], sb["spread_us"])
        out.append({
            "from": a, "to": b, "step_us": {a: sa, b: sb}, "delta_us": round(delta, 3),
            "delta_pct": round(100.0 * delta / sa["mean_us"], 2) if sa["mean_us"] else None,
            "noise_us": noise if known else None,
            "flagged": bool(known and delta > noise and delta > 0),
            "responsible": _responsible(timed, ops, a, b),
        })
    return out


def _per_step(timed: list[dict[str, Any]], version: str, op: str) -> float:
    """Time per step of an operator in a version's captures (us, averaged)."""
    values = [t["ops"][op]["mean_us"] * t["ops"][op]["count"] / t["steps"]
              for t in timed if t["version"] == version and op in t.get("ops", {}) and t.get("steps")]
    return float(np.mean(values)) if values else 0.0


def _responsible(timed: list[dict[str, Any]], ops: dict[str, Any] | None, a: str, b: str) -> list[dict[str, Any]]:
    if not ops:
        return []
    named = []
    for row in ops["rows"]:
        change = next((c for c in row["changes"] if c["from"] == a and c["to"] == b and c["flagged"]), None)
        if change is None:
            continue
        key = f"{row['side']}/{row['op']}"
        added = _per_step(timed, b, key) - _per_step(timed, a, key)
        named.append({"op": row["op"], "side": row["side"], "delta_pct": change["delta_pct"],
                      "added_per_step_us": round(added, 3)})
    named.sort(key=lambda r: -r["added_per_step_us"])
    return named
