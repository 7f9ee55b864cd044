"""Flow events of Chrome / Kineto traces: bound to slices, in time order, as edges."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np

from ..model.builder import finish_trace
from ..model.trace import EdgeKind, Trace
from .timeparse import NotANumber, us_text_to_ns

_EDGE_KIND_BY_FLOW_CAT = {"dependency": EdgeKind.DATA, "control": EdgeKind.CONTROL}
_FLOW_ORDER = {"s": 0, "t": 1, "f": 2}  # at equal times a flow starts, steps, then finishes


def resolve_flows(trace: Trace, flows: list[tuple[Any, int]], reader: Any) -> None:
    """Bind flow events to slices and turn them into dependency edges.

    Kineto's ``ac2g`` flows repeat what the ``correlation`` arg already says; they are used
    only for device events that lack a correlation id.
    """
    if not flows:
        return
    by_id = _flow_points(trace, flows, reader)
    if not by_id:
        return
    bind = _Binder(trace)
    src: list[int] = []
    dst: list[int] = []
    kinds: list[int] = []
    for (cat, _fid), points in by_id.items():
        # In time order: Kineto often writes a flow's finish before its start.
        points.sort()
        bound = [bind(ts, track, ph != "f" or bp == "e") for ts, _rank, _ordinal, ph, track, bp in points]
        for a, z in zip(bound, bound[1:]):
            if a < 0 or z < 0 or a == z:
                continue
            if cat == "ac2g":
                _correlate(trace, a, z)
                continue
            src.append(a)
            dst.append(z)
            kinds.append(_EDGE_KIND_BY_FLOW_CAT.get(cat, EdgeKind.FLOW))
    if src:
        trace.edge_src = np.concatenate([trace.edge_src, np.array(src, np.int64)])
        trace.edge_dst = np.concatenate([trace.edge_dst, np.array(dst, np.int64)])
        trace.edge_kind = np.concatenate([trace.edge_kind, np.array(kinds, np.uint8)])

    finish_trace(trace)


def _flow_points(trace: Trace, flows: list[tuple[Any, int]], reader: Any) -> dict[tuple, list[tuple]]:
    """The points of each flow (by category and id): (ts, phase rank, ordinal, phase,
    track, bp). ``critical_path`` flows (our own export) and unneeded ``ac2g`` are skipped."""
    need_ac2g = bool(((trace.corr < 0) & trace.on_device & trace.is_slice).any())
    by_id: dict[tuple, list[tuple]] = defaultdict(list)
    for e, ordinal in flows:
        cat = e.cat
        if cat == "critical_path" or (cat == "ac2g" and not need_ac2g):
            continue
        if not len(e.ts):
            raise reader._err("flow event has no 'ts'", ordinal)
        track = trace_track(trace, reader, e.pid, e.tid)
        if track < 0:
            continue
        try:
            ts = us_text_to_ns(e.ts)
        except NotANumber:
            raise reader._err("flow event's 'ts' is not a number", ordinal) from None
        by_id[(cat, e.id)].append((ts, _FLOW_ORDER.get(e.ph, 1), ordinal, e.ph, track, e.bp or ""))
    return by_id


def _correlate(trace: Trace, a: int, z: int) -> None:
    """An ``ac2g`` arrow from launch ``a`` to device work ``z`` without a correlation id."""
    if trace.corr[z] < 0:
        trace.corr[z] = trace.corr[a] if trace.corr[a] >= 0 else 10**12 + a
        trace.corr[a] = trace.corr[z]


class _Binder:
    """The slice a flow point binds to: the outermost one starting exactly there, else the
    innermost enclosing one (or, for a finish without ``bp: e``, the next one)."""

    def __init__(self, trace: Trace):
        slices = np.flatnonzero(trace.is_slice)
        order = np.lexsort((-trace.dur[slices], trace.ts[slices], trace.track[slices]))
        self.s_sorted = slices[order]
        self.key_track = trace.track[self.s_sorted].astype(np.int64)
        self.key_ts = trace.ts[self.s_sorted]
        self.parent, _ = trace.nesting()
        self.end = trace.end

    def __call__(self, ts: int, track: int, enclosing: bool) -> int:
        s_sorted, key_ts = self.s_sorted, self.key_ts
        lo = np.searchsorted(self.key_track, track, "left")
        hi = np.searchsorted(self.key_track, track, "right")
        k = lo + np.searchsorted(key_ts[lo:hi], ts, "right") - 1
        j = lo + np.searchsorted(key_ts[lo:hi], ts, "left")
        if j < hi and key_ts[j] == ts:
            return int(s_sorted[j])
        if enclosing:
            ev = int(s_sorted[k]) if k >= lo else -1
            while ev >= 0 and self.end[ev] < ts:
                ev = int(self.parent[ev])
            return ev
        return int(s_sorted[j]) if j < hi else -1


def trace_track(trace: Trace, reader: Any, pid, tid) -> int:
    """The track of (pid, tid) in a built trace, -1 if no slice is on it."""
    return reader.b.track_index.get((pid, tid), -1)
