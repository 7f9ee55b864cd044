"""Operator breakdown: which operator types take the time, on the host and on the device."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import orjson

from ..model.nesting import compute_nesting, self_times
from ..model.stats import group_stats, merge_intervals, us
from ..model.trace import DEVICE_KINDS, KIND_NAMES, Kind, Trace

SIDES = ("host", "device")
#: Device rows that are work, and those that are context (ranges, recorded waits).
DEVICE_WORK = tuple(KIND_NAMES[k] for k in DEVICE_KINDS)
DEVICE_CONTEXT = (KIND_NAMES[Kind.ANNOTATION], KIND_NAMES[Kind.SYNC])


@dataclass
class Breakdown:
    """Per (side, kind, operator type) statistics, plus what drill-downs need."""

    trace: Trace
    events: np.ndarray  # the events counted
    group: np.ndarray  # group index of each counted event
    self_ns: np.ndarray  # self time of each counted event
    keys: list[tuple[str, str, str]]  # (side, kind, op) per group
    count: np.ndarray
    total_ns: np.ndarray
    self_total_ns: np.ndarray
    max_ns: np.ndarray
    p50_ns: np.ndarray
    p95_ns: np.ndarray
    span_ns: int
    busy_ns: dict[str, int]

    def rows(
        self, side: str | None = None, top: int | None = None, kinds: tuple[str, ...] | None = None
    ) -> list[dict[str, Any]]:
        """Rows by total time. ``side='device'`` lists device work only (kernels, copies,
        fills, communication) unless ``kinds`` names others (e.g. ``('annotation', 'sync')``)."""
        if kinds is None and side == "device":
            kinds = DEVICE_WORK
        order = np.argsort(-self.total_ns, kind="stable")
        out = []
        for g in order.tolist():
            sd, kind, op = self.keys[g]
            if (side is not None and sd != side) or (kinds is not None and kind not in kinds):
                continue
            n = int(self.count[g])
            out.append(
                {
                    "op": op,
                    "side": sd,
                    "kind": kind,
                    "count": n,
                    "total_us": us(self.total_ns[g]),
                    "self_us": us(self.self_total_ns[g]),
                    "mean_us": us(self.total_ns[g] / n) if n else 0.0,
                    "p50_us": us(self.p50_ns[g]),
                    "p95_us": us(self.p95_ns[g]),
                    "max_us": us(self.max_ns[g]),
                    "share": round(float(self.total_ns[g]) / self.span_ns, 6) if self.span_ns else 0.0,
                }
            )
            if top is not None and len(out) >= top:
                break
        return out

    def to_dict(self, top: int | None = None) -> dict[str, Any]:
        return {
            "span_us": us(self.span_ns),
            "busy_us": {k: us(v) for k, v in self.busy_ns.items()},
            "host": self.rows("host", top),
            "device": self.rows("device", top),
            "device_annotations": self.rows("device", top, kinds=DEVICE_CONTEXT),
        }

    def _groups_of(self, op: str, side: str | None) -> list[int]:
        return [g for g, (sd, _k, o) in enumerate(self.keys) if o == op and (side is None or sd == side)]

    def instances(self, op: str, side: str | None = None, limit: int = 100) -> list[dict[str, Any]]:
        """Drill-down: the longest instances of one operator type."""
        groups = self._groups_of(op, side)
        sel = np.flatnonzero(np.isin(self.group, groups))
        sel = sel[np.argsort(-self.trace.dur[self.events[sel]], kind="stable")][:limit]
        out = []
        for k in sel.tolist():
            ev = self.trace.event(int(self.events[k]))
            ev["self_us"] = us(self.self_ns[k])
            out.append(ev)
        return out

    def group_by_arg(self, op: str, key: str, side: str | None = None) -> list[dict[str, Any]]:
        """Statistics of one operator type split by the value of one arg (e.g. 'Input Dims')."""
        groups = self._groups_of(op, side)
        sel = np.flatnonzero(np.isin(self.group, groups))
        by_value: dict[bytes, list[int]] = {}
        args = self.trace.args
        for k in sel.tolist():
            value = args.get(int(self.events[k])).get(key)
            by_value.setdefault(orjson.dumps(value), []).append(k)
        out = []
        for value, ks in by_value.items():
            idx = np.array(ks)
            d = self.trace.dur[self.events[idx]]
            out.append(
                {
                    "value": orjson.loads(value),
                    "count": len(ks),
                    "total_us": us(d.sum()),
                    "self_us": us(self.self_ns[idx].sum()),
                    "mean_us": us(d.mean()),
                    "max_us": us(d.max()),
                }
            )
        out.sort(key=lambda r: -r["total_us"])
        return out


def operator_breakdown(
    trace: Trace,
    *,
    window: tuple[int, int] | None = None,
    by: str = "op",
    side: str | None = None,
) -> Breakdown:
    """Statistics per operator type (``by='op'``) or per event name (``by='name'``).

    Every duration event counts once, under its side (host or device), its kind and its
    operator type. Self time subtracts the time of directly nested slices. ``window``
    (ns, ns) restricts the breakdown to events that start inside it; ``side`` ('host' or
    'device') to one side, which is quicker when only that side is wanted.
    """
    slices = trace.is_slice
    if side is None:
        parent, _ = trace.nesting()
    else:
        if side not in SIDES:
            raise ValueError(f"side must be one of {SIDES}")
        slices = slices & (trace.on_device == (side == "device"))
        parent, _ = compute_nesting(trace, slices)
    self_all = self_times(trace, parent, slices)
    mask = slices.copy()
    if window is not None:
        mask &= (trace.ts >= window[0]) & (trace.ts < window[1])
    events = np.flatnonzero(mask)
    label = trace.op if by == "op" else trace.name
    ev_side = trace.on_device[events].astype(np.int64)
    kind = trace.kind[events].astype(np.int64)
    key = (ev_side * len(Kind) + kind) * (len(trace.strings) + 1) + label[events]
    uniq, group = np.unique(key, return_inverse=True)
    group = group.astype(np.int64)
    n_groups = len(uniq)
    dur = trace.dur[events]
    self_ns = self_all[events]
    count = np.bincount(group, minlength=n_groups)
    total = np.bincount(group, weights=dur, minlength=n_groups)
    self_total = np.bincount(group, weights=self_ns, minlength=n_groups)
    pct, max_ns = group_stats(group, dur, n_groups, [0.5, 0.95])
    strings = trace.strings.strings
    keys = []
    for k in uniq.tolist():
        sk, lab = divmod(k, len(trace.strings) + 1)
        sd, kd = divmod(sk, len(Kind))
        keys.append((SIDES[sd], KIND_NAMES[Kind(kd)], strings[lab]))
    if window is not None:
        span = window[1] - window[0]
    else:
        t0, t1 = trace.span()
        span = t1 - t0
    busy = {}
    for sd, on_dev in (("host", False), ("device", True)):
        if side is not None and sd != side:
            continue
        m = mask & (trace.on_device == on_dev) & (trace.kind != Kind.ANNOTATION) & (trace.kind != Kind.SYNC)
        s, e = merge_intervals(trace.ts[m], trace.end[m])
        busy[sd] = int((e - s).sum())
    return Breakdown(
        trace=trace,
        events=events,
        group=group,
        self_ns=self_ns,
        keys=keys,
        count=count,
        total_ns=total,
        self_total_ns=self_total,
        max_ns=max_ns,
        p50_ns=pct[:, 0],
        p95_ns=pct[:, 1],
        span_ns=int(span),
        busy_ns=busy,
    )
