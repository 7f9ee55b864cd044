"""Flow events of Chrome / Kineto traces: bound to slices, in time order, as edges.

Everything is done on arrays of flow points (a few hundred thousand in a large Kineto
trace): points are grouped by flow (category and id, in order of first appearance), put in
time order within each flow, bound to slices with binary searches per thread, and
consecutive points of a flow become an edge.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...model.builder import finish_trace
from ...model.nesting import chain_time, sort_keys
from ...model.trace import EdgeKind, Trace
from .batch import TS_BAD, TS_MISSING, Flows

_EDGE_KIND_BY_FLOW_CAT = {"dependency": EdgeKind.DATA, "control": EdgeKind.CONTROL}
_FLOW_ORDER = {"s": 0, "t": 1, "f": 2}  # at equal times a flow starts, steps, then finishes


class _Points:
    """The flow points kept, in file order: ordinal, time, track, phase rank, whether a
    point binds to the slice enclosing it, and its flow (flows numbered in order of first
    appearance); each flow's category, as an index into ``cats``."""

    def __init__(self, ordinal, ts, track, rank, enclosing, flow, flow_cat, cats):
        self.ordinal, self.ts, self.track, self.rank = ordinal, ts, track, rank
        self.enclosing, self.flow, self.flow_cat, self.cats = enclosing, flow, flow_cat, cats


def resolve_flows(trace: Trace, flows: list[tuple[Flows, int]], reader: Any) -> None:
    """Bind flow events to slices and turn them into dependency edges.

    ``flows`` holds each batch's flow columns with the ordinal of its first event. Kineto's
    ``ac2g`` flows repeat what the ``correlation`` arg already says; they are used only when
    no kernel carries a correlation id and some device event lacks one.
    """
    pts = _flow_points(trace, flows, reader) if flows else None
    if pts is None:
        return
    order = np.lexsort((pts.ordinal, pts.rank, pts.ts, pts.flow))  # each flow in time order
    bound = _Binder(trace, np.unique(pts.track)).bind(pts.ts[order], pts.track[order], pts.enclosing[order])
    flow = pts.flow[order]
    a, z = bound[:-1], bound[1:]
    pair = np.flatnonzero((flow[:-1] == flow[1:]) & (a >= 0) & (z >= 0) & (a != z))
    is_ac2g = np.array([cat == "ac2g" for cat in pts.cats], bool)[pts.flow_cat]
    launches = pair[is_ac2g[flow[pair]]]
    for k in launches.tolist():
        _correlate(trace, int(a[k]), int(z[k]))
    edges = pair[~is_ac2g[flow[pair]]]
    if len(edges):
        kind_of_cat = np.array([_EDGE_KIND_BY_FLOW_CAT.get(cat, EdgeKind.FLOW) for cat in pts.cats], np.uint8)
        kind_of_flow = kind_of_cat[pts.flow_cat]
        trace.edge_src = np.concatenate([trace.edge_src, a[edges].astype(np.int64)])
        trace.edge_dst = np.concatenate([trace.edge_dst, z[edges].astype(np.int64)])
        trace.edge_kind = np.concatenate([trace.edge_kind, kind_of_flow[flow[edges]]])
    finish_trace(trace)


def _flow_points(trace: Trace, flows: list[tuple[Flows, int]], reader: Any) -> _Points | None:
    """The points to bind, or None if there are none. ``critical_path`` flows (our own
    export) and unneeded ``ac2g`` are skipped; points on threads without events too. The
    first kept point without a time, or with one that is not a number, is an error."""
    use_ac2g = not reader.correlated and bool(((trace.corr < 0) & trace.on_device & trace.is_slice).any())
    parts = []
    for fl, first in flows:
        keys = fl.keys
        skip = np.array([cat == "critical_path" or (cat == "ac2g" and not use_ac2g) for cat, *_ in keys], bool)
        kept = ~skip[fl.key]
        if not kept.any():
            continue
        track_of_key = np.array([reader.b.track_index.get((pid, tid), -1) for _c, _p, _b, pid, tid in keys], np.int64)
        track = track_of_key[fl.key]
        missing = kept & (fl.ts_state == TS_MISSING)
        bad = kept & (track >= 0) & (fl.ts_state == TS_BAD)
        if missing.any() or bad.any():
            k = int(np.flatnonzero(missing | bad)[0])
            what = "flow event has no 'ts'" if missing[k] else "flow event's 'ts' is not a number"
            raise reader._err(what, first + int(fl.local[k]))
        use = np.flatnonzero(kept & (track >= 0))
        if not len(use):
            continue
        rank = np.array([_FLOW_ORDER.get(ph, 1) for _c, ph, *_ in keys], np.int8)
        enclosing = np.array([ph != "f" or bp == "e" for _c, ph, bp, *_ in keys], bool)
        codes = fl.key[use]
        cats = [keys[c][0] for c in codes.tolist()]
        ids = list(map(fl.ids.__getitem__, use.tolist()))
        parts.append((first + fl.local[use], fl.ts[use], track[use], rank[codes], enclosing[codes], cats, ids))
    if not parts:
        return None
    joined = [np.concatenate([part[i] for part in parts]) for i in range(5)]
    return _Points(*joined, *_group([c for part in parts for c in part[5]], [i for part in parts for i in part[6]]))


def _group(cats: list[str], ids: list) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Each point's flow (a category and an id), flows numbered in order of first
    appearance; each flow's category (an index into the list of categories returned).
    Integer ids (Kineto's) are grouped with arrays, others one by one."""
    names = list(dict.fromkeys(cats))
    code = dict(zip(names, range(len(names))))
    cat = np.fromiter(map(code.__getitem__, cats), np.int64, len(cats))
    if ids and set(map(type, ids)) == {int}:  # all of them ints (not bools)
        ident = np.array(ids, object if max(map(abs, ids)) >= 1 << 62 else np.int64)
        if ident.dtype == np.int64:
            lo, hi = int(ident.min()), int(ident.max())
            if len(names) * (hi - lo + 1) < (1 << 62):
                _, first, inverse = np.unique(cat * (hi - lo + 1) + (ident - lo), return_index=True,
                                              return_inverse=True)
                rank = np.empty(len(first), np.int64)
                by_first = np.argsort(first)
                rank[by_first] = np.arange(len(first))
                return rank[inverse.reshape(-1)], cat[first[by_first]], names
    groups: dict[tuple, int] = {}
    flow = np.fromiter((groups.setdefault(key, len(groups)) for key in zip(cat.tolist(), ids)), np.int64, len(ids))
    return flow, np.array([c for c, _ in groups], np.int64), names


def _correlate(trace: Trace, a: int, z: int) -> None:
    """An ``ac2g`` arrow from launch ``a`` to device work ``z`` without a correlation id."""
    if trace.corr[z] < 0:
        trace.corr[z] = trace.corr[a] if trace.corr[a] >= 0 else 10**12 + a
        trace.corr[a] = trace.corr[z]


class _Binder:
    """The slice a flow point binds to: the outermost one starting exactly there, else the
    innermost enclosing one (or, for a finish without ``bp: e``, the next one)."""

    def __init__(self, trace: Trace, tracks: np.ndarray):
        slices = np.flatnonzero(trace.is_slice & np.isin(trace.track, tracks))
        track = trace.track[slices].astype(np.int64)
        ts = trace.ts[slices]
        order = sort_keys((-trace.dur[slices], *chain_time(track, ts, ts + trace.dur[slices])))
        self.trace = trace
        self.s_sorted = slices[order]
        self.key_track = trace.track[self.s_sorted]
        self.key_ts = trace.ts[self.s_sorted]

    def bind(self, ts: np.ndarray, track: np.ndarray, enclosing: np.ndarray) -> np.ndarray:
        out = np.full(len(ts), -1, np.int64)
        walk: list[np.ndarray] = []
        for t in np.unique(track).tolist():
            lo, hi = np.searchsorted(self.key_track, [t, t + 1])
            seg_ts, seg = self.key_ts[lo:hi], self.s_sorted[lo:hi]
            p = np.flatnonzero(track == t)
            q = ts[p]
            j = np.searchsorted(seg_ts, q, "left")
            k = np.searchsorted(seg_ts, q, "right") - 1
            exact = (j < len(seg)) & (seg_ts[np.minimum(j, len(seg) - 1)] == q) if len(seg) else j < 0
            res = np.full(len(p), -1, np.int64)
            res[exact] = seg[j[exact]]
            inner = ~exact & enclosing[p] & (k >= 0)
            res[inner] = seg[k[inner]]
            nxt = ~exact & ~enclosing[p] & (j < len(seg))
            res[nxt] = seg[j[nxt]]
            out[p] = res
            walk.append(p[inner])
        self._walk_up(out, np.concatenate(walk) if walk else np.zeros(0, np.int64), ts)
        return out

    def _walk_up(self, out: np.ndarray, pending: np.ndarray, ts: np.ndarray) -> None:
        """From the last slice starting before each point, up to the first that has not
        ended before it (none: -1)."""
        end = self.trace.end
        pending = pending[end[out[pending]] < ts[pending]]
        if not len(pending):
            return
        parent, _ = self.trace.nesting()
        while len(pending):
            out[pending] = parent[out[pending]]
            pending = pending[out[pending] >= 0]
            pending = pending[end[out[pending]] < ts[pending]]
