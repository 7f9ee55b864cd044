"""Reading a ready trace's stored results for pages and the API (never the raw trace)."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import numpy as np
import orjson

from traces.models import Trace
from traces.store import results
from traces.store.files import TraceFiles

SIDES = ("host", "device")
ORDERS = ("duration", "start", "self")
#: Kinds in the order the page shows them (framework operators first).
KIND_ORDER = ("host_op", "kernel", "comm", "memcpy", "memset", "runtime", "sync", "annotation", "python")
_SUMMARIES: OrderedDict[tuple[int, str], dict] = OrderedDict()
_SUMMARY_CACHE_SIZE = 16


def summary(trace: Trace) -> dict[str, Any]:
    """The stored summary of a ready trace, kept in a small per-process cache."""
    key = (trace.pk, str(trace.ready_at))
    found = _SUMMARIES.get(key)
    if found is None:
        found = results.read_summary(TraceFiles(trace.pk))
        _SUMMARIES[key] = found
        while len(_SUMMARIES) > _SUMMARY_CACHE_SIZE:
            _SUMMARIES.popitem(last=False)
    else:
        _SUMMARIES.move_to_end(key)
    return found


def kinds_by_side(data: dict[str, Any]) -> dict[str, list[str]]:
    """Which kinds each side holds, framework operators first."""
    present: dict[str, set[str]] = {side: set() for side in SIDES}
    for row in data["rows"]:
        present[row["side"]].add(row["kind"])
    rank = {k: i for i, k in enumerate(KIND_ORDER)}
    return {side: sorted(kinds, key=lambda k: rank.get(k, 99)) for side, kinds in present.items()}


PUBLIC_ROW_FIELDS = (
    "op", "side", "kind", "count", "total_us", "self_us", "mean_us", "p50_us", "p95_us", "max_us", "share",
)


def breakdown(trace: Trace, side: str, kind: str | None = None) -> list[dict[str, Any]]:
    """Every operator type of one side (and kind), by total time."""
    rows = summary(trace)["rows"]
    return [
        {k: row[k] for k in PUBLIC_ROW_FIELDS}
        for row in rows
        if row["side"] == side and (kind is None or row["kind"] == kind)
    ]


@dataclass
class InstanceQuery:
    side: str
    op: str
    kind: str | None = None
    order: str = "duration"
    limit: int = 50
    offset: int = 0
    group_by: str | None = None


class UnknownOperator(LookupError):
    pass


def _matching_rows(data: dict[str, Any], q: InstanceQuery) -> list[dict[str, Any]]:
    rows = [
        r for r in data["rows"]
        if r["side"] == q.side and r["op"] == q.op and (q.kind is None or r["kind"] == q.kind)
    ]
    if not rows:
        where = f"{q.side} side" + (f", kind {q.kind}" if q.kind else "")
        raise UnknownOperator(f"no operator type {q.op!r} on the {where} of this trace")
    return rows


def _sorted(records: np.ndarray, order: str) -> np.ndarray:
    if order == "start":
        return records[np.argsort(records["ts"], kind="stable")]
    field = "self" if order == "self" else "dur"
    return records[np.argsort(-records[field], kind="stable")]


def instances(trace: Trace, q: InstanceQuery) -> dict[str, Any]:
    """The drill-down of one operator type: a page of instances, a histogram, a group-by."""
    data = summary(trace)
    rows = _matching_rows(data, q)
    files = TraceFiles(trace.pk)
    parts = [results.read_records(files, r["first"], r["count"]) for r in rows]
    records = parts[0] if len(parts) == 1 else np.concatenate(parts)
    if len(parts) > 1 or q.order != "duration":
        records = _sorted(records, q.order)
    page = records[q.offset : q.offset + q.limit]
    out = {
        "op": q.op,
        "side": q.side,
        "kinds": [r["kind"] for r in rows],
        "count": int(len(records)),
        "order": q.order,
        "limit": q.limit,
        "offset": q.offset,
        "histogram": results.histogram(records["dur"]),
        "results": _describe(data, page, results.read_args(files, page)),
    }
    if q.group_by:
        out["group_by"] = q.group_by
        out["groups"] = _group_by(records, results.read_args(files, records), q.group_by)
    return out


def _describe(data: dict[str, Any], page: np.ndarray, args: list[dict]) -> list[dict[str, Any]]:
    strings, tracks = data["strings"], data["tracks"]
    t0_ns = data["header"]["start_us"] * 1000
    out = []
    for rec, a in zip(page.tolist(), args, strict=True):
        ts, dur, self_ns, _off, _len, name, track, launcher = rec
        out.append(
            {
                "name": strings[name],
                "start_us": round((ts - t0_ns) / 1000, 3),
                "dur_us": round(dur / 1000, 3),
                "self_us": round(self_ns / 1000, 3),
                "track": tracks[track] if 0 <= track < len(tracks) else "",
                "launched_by": strings[launcher] if launcher >= 0 else None,
                "args": a,
            }
        )
    return out


def _group_by(records: np.ndarray, args: list[dict], key: str) -> list[dict[str, Any]]:
    """Statistics of the instances split by the value of one arg (missing: null)."""
    by_value: dict[bytes, list[int]] = {}
    for i, a in enumerate(args):
        by_value.setdefault(orjson.dumps(a.get(key), option=orjson.OPT_SORT_KEYS), []).append(i)
    out = []
    for value, idx in by_value.items():
        d = records["dur"][idx]
        s = records["self"][idx]
        out.append(
            {
                "value": orjson.loads(value),
                "count": len(idx),
                "total_us": round(float(d.sum()) / 1000, 3),
                "self_us": round(float(s.sum()) / 1000, 3),
                "mean_us": round(float(d.mean()) / 1000, 3),
                "max_us": round(float(d.max()) / 1000, 3),
            }
        )
    out.sort(key=lambda r: -r["total_us"])
    return out

