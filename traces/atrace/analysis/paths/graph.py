"""The graph a critical path runs through (see :mod:`.critical_path` for what it means).

Each thread's or stream's start and end points form a *chain*; the pieces between points
weigh their work. Cross edges join the chains: the source's explicit dependencies, launch
edges (weighing the launch queueing) and queue edges for work that waited behind other work
on its device, and sync edges from the last device work to finish inside a synchronisation
call to that call's end. Only points where a cross edge starts or ends (and each chain's
ends) become graph nodes, *anchors*; the work between them is a prefix-sum difference.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...model.nesting import Points, order_points
from ...model.trace import FLAG_SYNC, Trace

EDGE_TYPES = ("sequence", "nested", "launch", "sync", "data", "control", "flow", "queue", "collective")
LAUNCH, SYNC, QUEUE = 2, 3, 7  # positions in EDGE_TYPES; 0 is an edge along a chain
_EXPLICIT = {0: 4, 1: 5, 2: 6, 3: 8}  # EdgeKind -> edge type


@dataclass
class PathGraph:
    """The condensed graph: anchors (points where chains meet cross edges) and edges."""

    pts: Points
    sel: np.ndarray
    weight: np.ndarray  # per point: work weight of the piece after it
    owner: np.ndarray  # per point: local index of the slice open after it (-1: none)
    work_before: np.ndarray  # per point: work done on its chain before it
    anchors: np.ndarray  # point positions
    e_src: np.ndarray  # anchor indices
    e_dst: np.ndarray
    e_w: np.ndarray
    e_type: np.ndarray


def build_graph(trace: Trace, sel: np.ndarray, pairs: tuple[np.ndarray, np.ndarray]) -> PathGraph:
    pts = order_points(trace, sel)
    weight, owner = _chain_weights(trace, sel, pts)
    prefix = np.zeros(len(weight) + 1, np.int64)
    np.cumsum(weight, out=prefix[1:])
    work_before = prefix[:-1]
    loc = np.full(len(trace), -1, np.int64)
    loc[sel] = np.arange(len(sel))
    src, dst, etype, ew = _cross_edges(trace, sel, loc, pts, pairs)
    same_chain = np.zeros(len(pts.time), bool)
    same_chain[:-1] = pts.chain[1:] == pts.chain[:-1]
    chain_first = np.ones(len(pts.time), bool)
    chain_first[1:] = ~same_chain[:-1]
    is_anchor = chain_first | ~same_chain
    is_anchor[src] = True
    is_anchor[dst] = True
    anchors = np.flatnonzero(is_anchor)
    along = np.flatnonzero(pts.chain[anchors[1:]] == pts.chain[anchors[:-1]])
    c_w = work_before[anchors[along + 1]] - work_before[anchors[along]]
    return PathGraph(
        pts=pts, sel=sel, weight=weight, owner=owner, work_before=work_before, anchors=anchors,
        e_src=np.concatenate([along, np.searchsorted(anchors, src)]),
        e_dst=np.concatenate([along + 1, np.searchsorted(anchors, dst)]),
        e_w=np.concatenate([c_w, ew]),
        e_type=np.concatenate([np.zeros(len(along), np.int64), etype]),
    )


def _chain_weights(trace: Trace, sel: np.ndarray, pts: Points) -> tuple[np.ndarray, np.ndarray]:
    """Per point: the work weight of the piece after it, and the slice that owns it.

    A piece weighs its length when a slice is open over it (the innermost open slice owns
    it: its self time), nothing when the chain is idle or the open slice is a
    synchronisation call (waiting is not work).
    """
    n_pts = len(pts.time)
    loc = np.full(len(trace), -1, np.int64)
    loc[sel] = np.arange(len(sel))
    parent_local = np.where(pts.parent >= 0, loc[np.maximum(pts.parent, 0)], -1)
    owner = np.where(pts.is_end, parent_local[pts.local], pts.local)
    same_chain = np.zeros(n_pts, bool)
    same_chain[:-1] = pts.chain[1:] == pts.chain[:-1]
    gap = np.zeros(n_pts, np.int64)
    gap[:-1] = pts.time[1:] - pts.time[:-1]
    owner = np.where(same_chain, owner, -1)
    is_sync = (trace.flags[sel] & FLAG_SYNC) != 0
    works = owner >= 0
    works[works] &= ~is_sync[owner[works]]
    return np.where(works, gap, 0), owner


def _cross_edges(trace: Trace, sel: np.ndarray, loc: np.ndarray, pts: Points, pairs):
    """(source point, target point, edge type, weight) of the edges between chains."""
    parts = [_explicit_edges(trace, loc, pts)]
    arrived = np.full(len(trace), np.iinfo(np.int64).min, np.int64)
    np.maximum.at(arrived, pts.event[parts[0][1]], pts.time[parts[0][0]])
    parts.append(_launch_edges(trace, sel, loc, pts, arrived, pairs))
    parts.append(_sync_edges(trace, sel, loc, pts, pairs))
    return tuple(np.concatenate([part[k] for part in parts]) for k in range(4))


def _from_point(trace: Trace, loc: np.ndarray, pts: Points, a: np.ndarray, z: np.ndarray) -> np.ndarray:
    """End of ``a`` if it ended before ``z`` started, else its start; -1 if neither."""
    la = loc[a]
    p = np.where(trace.end[a] <= trace.ts[z], pts.end_pos[la], pts.start_pos[la])
    return np.where(trace.ts[a] <= trace.ts[z], p, -1)


def _edges(src, dst, etype, weight=None):
    src = np.asarray(src, np.int64)
    n = len(src)
    weight = np.zeros(n, np.int64) if weight is None else np.asarray(weight, np.int64)
    return src, np.asarray(dst, np.int64), np.broadcast_to(np.asarray(etype, np.int64), (n,)).copy(), weight


def _explicit_edges(trace: Trace, loc: np.ndarray, pts: Points):
    """The source's dependencies (model graph, flows, collectives): end (or start) -> start."""
    a, z = trace.edge_src, trace.edge_dst
    keep = (loc[a] >= 0) & (loc[z] >= 0) & (a != z) if len(a) else np.zeros(0, bool)
    a, z, kind = a[keep], z[keep], trace.edge_kind[keep]
    p = _from_point(trace, loc, pts, a, z)
    ok = p >= 0
    types = np.array([_EXPLICIT[int(x)] for x in kind[ok].tolist()], np.int64)
    return _edges(p[ok], pts.start_pos[loc[z[ok]]], types)


def _launch_edges(trace: Trace, sel: np.ndarray, loc: np.ndarray, pts: Points, arrived: np.ndarray, pairs):
    """Launch -> device work, weighing the launch queueing; queue edges for work that
    waited behind other work on its device.

    The queueing runs from the launch call (its end, or its start if the work began before
    the call returned), or from when earlier work on the device ended, or from when a
    dependency arrived, whichever is latest, to the start of the device work.
    """
    rt, dev = pairs
    keep = (loc[rt] >= 0) & (loc[dev] >= 0)
    rt, dev = rt[keep], dev[keep]
    p = _from_point(trace, loc, pts, rt, dev)
    ok = p >= 0
    dev, p = dev[ok], p[ok]
    before = _last_done_on_device(trace, sel, dev)
    done = trace.end[np.maximum(before, 0)]
    waited = (before >= 0) & (done > pts.time[p])
    ready = np.maximum(np.where(waited, done, pts.time[p]), arrived[dev])
    launch = _edges(p, pts.start_pos[loc[dev]], LAUNCH, np.maximum(trace.ts[dev] - ready, 0))
    queue = _edges(pts.end_pos[loc[before[waited]]], pts.start_pos[loc[dev[waited]]], QUEUE)
    return tuple(np.concatenate([x, y]) for x, y in zip(launch, queue))


def _sync_edges(trace: Trace, sel: np.ndarray, loc: np.ndarray, pts: Points, pairs):
    """The last device work (of the calling process) to finish while a sync call waited ->
    that call's end."""
    sync = sel[((trace.flags[sel] & FLAG_SYNC) != 0) & ~trace.on_device[sel]]
    devs = sel[trace.on_device[sel]]
    if not len(sync) or not len(devs):
        return _edges([], [], SYNC)
    a, z = _sync_pairs(trace, sync, devs, _launching_process(trace, devs, pairs))
    return _edges(pts.end_pos[loc[a]], pts.end_pos[loc[z]], SYNC)


def _process_numbers(trace: Trace) -> np.ndarray:
    """Per track: a number for its process (pid)."""
    seen: dict = {}
    return np.array([seen.setdefault(t.pid, len(seen)) for t in trace.tracks], np.int64)


def _launching_process(trace: Trace, devs: np.ndarray, pairs) -> np.ndarray:
    """Per device event: the process number of the call that launched it (-1: unknown)."""
    proc = _process_numbers(trace)
    rt, dev = pairs
    launcher = np.full(len(trace), -1, np.int64)
    launcher[dev] = proc[trace.track[rt]]
    return launcher[devs]


def _sync_pairs(trace: Trace, sync: np.ndarray, devs: np.ndarray, dev_proc: np.ndarray):
    """(device event, sync call) pairs: per call, the last device work of its process (or of
    unknown origin) to end while it waited."""
    ts, end = trace.ts, trace.end
    proc = _process_numbers(trace)[trace.track[sync]]
    src, dst = [], []
    for p in distinct(proc):
        calls = sync[proc == p]
        mine = devs[(dev_proc == p) | (dev_proc < 0)]
        if not len(mine):
            continue
        mine = mine[np.argsort(end[mine], kind="stable")]
        k = np.searchsorted(end[mine], end[calls], "right") - 1
        ok = k >= 0
        ok[ok] &= end[mine[k[ok]]] > ts[calls[ok]]
        src.append(mine[k[ok]])
        dst.append(calls[ok])
    if not src:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    return np.concatenate(src), np.concatenate(dst)


def _last_done_on_device(trace: Trace, sel: np.ndarray, dev: np.ndarray) -> np.ndarray:
    """Per device event: the selected device work on the same device that ended last
    before it started (-1 if none). Work launched early waits behind it in the queue."""
    out = np.full(len(dev), -1, np.int64)
    on_dev = sel[trace.on_device[sel]]
    if not len(on_dev) or not len(dev):
        return out
    device = _device_numbers(trace)
    order = np.lexsort((trace.end[on_dev], device[trace.track[on_dev]]))
    done, done_dev = on_dev[order], device[trace.track[on_dev[order]]]
    for d in distinct(device[trace.track[dev]]):
        lo, hi = np.searchsorted(done_dev, d, "left"), np.searchsorted(done_dev, d, "right")
        mine = np.flatnonzero(device[trace.track[dev]] == d)
        k = lo + np.searchsorted(trace.end[done[lo:hi]], trace.ts[dev[mine]], "right") - 1
        ok = k >= lo
        # Only work that began strictly earlier (never itself, no loops between empty slices).
        ok[ok] &= trace.ts[done[k[ok]]] < trace.ts[dev[mine[ok]]]
        out[mine[ok]] = done[k[ok]]
    return out


def _device_numbers(trace: Trace) -> np.ndarray:
    """Per track: a number for its device (the track's device id, else one per process)."""
    seen: dict = {}
    return np.array([seen.setdefault(t.device if t.device >= 0 else ("pid", t.pid), len(seen))
                     for t in trace.tracks], np.int64)


def distinct(small: np.ndarray) -> list[int]:
    """The distinct values of an array of small non-negative integers (track, device or
    process numbers), in order; counting them beats hashing a long array."""
    return np.flatnonzero(np.bincount(small)).tolist() if len(small) else []
