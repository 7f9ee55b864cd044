"""Critical path: the longest chain of dependent work through a trace.

The graph
---------
Every work slice (host operator, runtime call, kernel, transfer...) has a start point and an
end point. On each thread or stream the points, in time order, form a *chain*: the piece
between two consecutive points is work of the innermost open slice (its self time) and
weighs that long, or weighs nothing when no slice is open (idle) or when the open slice is a
synchronisation call (waiting is not work). Nesting and same-thread / same-stream ordering
are thereby edges of the chain. Across chains the edges weigh nothing and state causes:

* launch: the runtime call that launched a kernel -> the kernel's start (by correlation id);
* queue: device work launched before it could start -> from the work that finished last on
  the same device before it started (it waited in the device's queue behind that work);
* sync: the last device slice to finish inside a synchronisation call -> that call's end;
* dependency: the source's explicit edges (model graph data / control deps, flow events)
  -> from the end of one slice to the start of the other.

Every edge runs forward in time, so the graph is acyclic; the critical path is its longest
path, i.e. the causal chain that holds the most work. A launch edge weighs the launch
queueing (launch to start, unless the work waited behind other work on its device). Python
frames and annotations are context: not on the path. ``bounds_ns`` splits the path's
elapsed time into host, device, launch queueing, sync waits and idle. Its length is therefore at least the
busy time of any single thread or stream. A slice's *slack* is how much longer it could take
before the critical path grows: the path length minus the longest path through it.

For speed the chains are condensed: only points where a cross edge starts or ends (and the
chain ends) become graph nodes; the work between them is a prefix-sum difference.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...errors import EmptyTraceError
from ...model.links import launch_pairs
from ...model.nesting import Points
from ...model.stats import covered, distribution, us
from ...model.trace import FLAG_SYNC, KIND_NAMES, Kind, Trace
from .graph import EDGE_TYPES, LAUNCH, QUEUE, SYNC, PathGraph, build_graph, distinct
from .longest_path import longest_paths, topological_order

#: What the path runs through: operators, runtime calls and device work (not frames).
PATH_KINDS = (Kind.HOST_OP, Kind.RUNTIME, Kind.KERNEL, Kind.MEMCPY, Kind.MEMSET, Kind.COMM)
#: What bounds the path at each moment (see ``CriticalPath.bounds_ns``).
BOUNDS = ("host", "device", "launch_queueing", "sync_wait", "idle")


@dataclass
class CriticalPath:
    trace: Trace
    length_ns: int
    events: np.ndarray  # ordered events along the path
    on_path_ns: np.ndarray  # time each of those events contributes to the path
    via: list[str]  # edge type that led to each event ("start" for the first)
    selected: np.ndarray  # events considered
    slack_ns: np.ndarray  # per selected event
    window: tuple[int, int]
    extra: dict[str, Any] = field(default_factory=dict)
    bounds_ns: dict[str, int] = field(default_factory=dict)  # BOUNDS -> ns, path start to end

    @property
    def edges(self) -> list[tuple[int, int, str]]:
        ev = self.events.tolist()
        return [(a, b, v) for a, b, v in zip(ev, ev[1:], self.via[1:])]

    def slack_of(self, event: int) -> int | None:
        k = np.searchsorted(self.selected, event)
        if k < len(self.selected) and self.selected[k] == event:
            return int(self.slack_ns[k])
        return None

    def by_op(self) -> list[dict[str, Any]]:
        t = self.trace
        s = t.strings.strings
        if not len(self.events):
            return []
        key = t.on_device[self.events].astype(np.int64) * (len(s) + 1) + t.op[self.events]
        uniq, inv = np.unique(key, return_inverse=True)
        time = np.bincount(inv, weights=self.on_path_ns, minlength=len(uniq))
        count = np.bincount(inv, weights=self.on_path_ns > 0, minlength=len(uniq))
        rows = []
        for j in np.argsort(-time).tolist():
            if time[j] <= 0:
                continue
            side, op = divmod(int(uniq[j]), len(s) + 1)
            rows.append(
                {
                    "op": s[op],
                    "side": "device" if side else "host",
                    "count": int(count[j]),
                    "time_us": us(time[j]),
                    "share": round(float(time[j]) / self.length_ns, 6) if self.length_ns else 0.0,
                }
            )
        return rows

    def to_dict(self, max_steps: int = 500, top_slack: int = 20) -> dict[str, Any]:
        t = self.trace
        s = t.strings.strings
        steps = []
        for k, (e, w, via) in enumerate(zip(self.events.tolist(), self.on_path_ns.tolist(), self.via)):
            if k >= max_steps:
                break
            steps.append(
                {
                    "index": e,
                    "name": s[t.name[e]],
                    "op": s[t.op[e]],
                    "kind": KIND_NAMES[Kind(int(t.kind[e]))],
                    "side": "device" if t.on_device[e] else "host",
                    "track": int(t.track[e]),
                    "start_us": us(t.ts[e]),
                    "dur_us": us(t.dur[e]),
                    "on_path_us": us(w),
                    "via": via,
                }
            )
        on_path = np.zeros(len(self.selected), bool)
        on_path[np.searchsorted(self.selected, np.unique(self.events))] = True
        off = np.flatnonzero(~on_path)
        least = off[np.lexsort((-t.dur[self.selected[off]], self.slack_ns[off]))][:top_slack]
        dev_time = float(self.on_path_ns[t.on_device[self.events]].sum()) if len(self.events) else 0.0
        host_time = float(self.on_path_ns.sum()) - dev_time if len(self.events) else 0.0
        elapsed = sum(self.bounds_ns.values())
        return {
            "length_us": us(self.length_ns),
            "span_us": us(self.window[1] - self.window[0]),
            "window_us": [us(self.window[0]), us(self.window[1])],
            "steps_total": len(self.events),
            "steps_truncated": len(self.events) > max_steps,
            "steps": steps,
            "by_op": self.by_op(),
            "by_side": {
                "host_us": us(host_time),
                "device_us": us(dev_time),
            },
            "by_bound": {
                f"{k}_us": us(v) for k, v in self.bounds_ns.items()
            },
            "bound_shares": {k: round(v / elapsed, 6) if elapsed else 0.0 for k, v in self.bounds_ns.items()},
            "bound": max(self.bounds_ns, key=self.bounds_ns.get) if elapsed else None,
            "slack": {
                "operators": len(self.selected),
                "on_path": int(on_path.sum()),
                "off_path": distribution(self.slack_ns[off]),
                "least_slack_off_path": [
                    {
                        "index": int(self.selected[k]),
                        "name": s[t.name[self.selected[k]]],
                        "dur_us": us(t.dur[self.selected[k]]),
                        "slack_us": us(self.slack_ns[k]),
                    }
                    for k in least.tolist()
                ],
            },
            **self.extra,
        }


def step_window(trace: Trace, step: int | str) -> tuple[int, int]:
    """(start, end) of a step annotation: ``step=3`` finds ``ProfilerStep#3``."""
    names = [f"ProfilerStep#{step}", f"step#{step}"] if isinstance(step, int) else [step]
    ids = [i for i in (trace.find_name(n) for n in names) if i >= 0]
    name = names[0]
    hits = np.flatnonzero(np.isin(trace.name, ids)) if ids else np.zeros(0, np.int64)
    if not len(hits):
        raise EmptyTraceError(f"no step annotation named {name!r}")
    e = int(hits[np.argmax(trace.dur[hits])])
    return int(trace.ts[e]), int(trace.end[e])


def steps(trace: Trace) -> list[str]:
    """Names of the step annotations (ProfilerStep#N, emulator 'step N'), in time order."""
    s = trace.strings.strings
    ids = [i for i, x in enumerate(s) if x.startswith("ProfilerStep#") or x.startswith("step#")]
    if not ids:
        return []
    hits = np.flatnonzero(np.isin(trace.name, ids))
    hits = hits[np.argsort(trace.ts[hits])]
    seen, out = set(), []
    for h in hits.tolist():
        n = s[trace.name[h]]
        if n not in seen:
            seen.add(n)
            out.append(n)
    return out


def select_work(trace: Trace, window: tuple[int, int] | None, pairs: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    """The slices the path may run through: operators, runtime calls and device work.

    Python frames and annotations are context, not work: a frame's time is its operators'
    time or waiting (a monitor thread sleeping in ``threading.wait`` is not on any path).
    In a window, device work belongs to the step whose host code launched it; device work
    with no launch in the trace counts only if it starts inside the window.
    """
    work = trace.kind_mask(*PATH_KINDS) & trace.is_slice
    if window is None:
        return np.flatnonzero(work)
    t0, t1 = window
    inside = (trace.ts >= t0) & (trace.ts < t1)
    host = work & ~trace.on_device & inside
    rt, dev = pairs
    dev_sel = np.zeros(len(trace), bool)
    dev_sel[dev[host[rt]]] = True
    unlaunched = work & trace.on_device & inside
    unlaunched[dev] = False
    return np.flatnonzero(host | dev_sel | unlaunched)


def critical_path(
    trace: Trace, *, step: int | str | None = None, window: tuple[int, int] | None = None
) -> CriticalPath:
    """The critical path of the whole trace, of one step, or of a time window (ns)."""
    if step is not None:
        window = step_window(trace, step)
    pairs = launch_pairs(trace)
    sel = select_work(trace, window, pairs)
    if not len(sel):
        raise EmptyTraceError("no work events to build a critical path from")
    g = build_graph(trace, sel, pairs)
    na = len(g.anchors)
    order = topological_order(g.anchors, g.pts.time, g.e_src, g.e_dst, na)
    dist, pred, pred_edge, tail = longest_paths(order, g.e_src, g.e_dst, g.e_w, na)
    best = int(np.argmax(dist))
    length = int(dist[best])
    hops = anchor_path(best, pred, pred_edge)
    events, on_path, via = _walk(hops, g)
    return CriticalPath(
        trace=trace,
        length_ns=length,
        events=events,
        on_path_ns=on_path,
        via=via,
        selected=sel,
        slack_ns=_slack(g, dist, tail, length),
        window=window if window is not None else trace.span(),
        bounds_ns=path_bounds(trace, hops, g),
    )


def anchor_path(best: int, pred: np.ndarray, pred_edge: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The anchors from the start of the path to ``best``, and the edge that led to each."""
    pred_list = pred.tolist()
    path = []
    v = best
    while v >= 0:
        path.append(v)
        v = pred_list[v]
    path.reverse()
    anchors = np.array(path, np.int64)
    return anchors, pred_edge[anchors]


def _ranges(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """The positions lo[0]..hi[0]-1, lo[1]..hi[1]-1, ... as one array."""
    n = hi - lo
    total = int(n.sum())
    if not total:
        return np.zeros(0, np.int64)
    return np.repeat(lo - (np.cumsum(n) - n), n) + np.arange(total)


def _slack(g: PathGraph, dist: np.ndarray, tail: np.ndarray, length: int) -> np.ndarray:
    """Per selected slice: path length minus the longest path through it."""
    W, anchors = g.work_before, g.anchors
    n_pts = len(W)
    m = len(g.sel)
    # The longest path through a point: the longest to the anchor at or before it, the work
    # from there to the point, the work from it to the anchor at or after it, and the
    # longest from there; the point's own prefix W cancels out. Every chain's first and last
    # points are anchors, so both anchors exist and lie on its chain. Built in place: at
    # millions of points each temporary array is a hundred MB.
    is_anchor = np.zeros(n_pts, bool)
    is_anchor[anchors] = True
    at = np.cumsum(is_anchor, dtype=np.int64)
    at -= 1  # the anchor at or before each point
    work_at = W[anchors]
    through = np.empty(n_pts + 1, np.int64)  # one more: reduceat's last range ends on it
    through[-1] = 0
    np.take(dist - work_at, at, out=through[:-1])
    np.logical_not(is_anchor, out=is_anchor)
    at += is_anchor  # the anchor at or after each point
    del is_anchor
    work_at += tail
    through[:-1] += work_at[at]
    del at, work_at
    # Range maximum per slice; slices in start order keep the in-between ranges short.
    by_start = np.argsort(g.pts.start_pos)
    bounds = np.empty(2 * m, np.int64)
    bounds[0::2] = g.pts.start_pos[by_start]
    bounds[1::2] = g.pts.end_pos[by_start] + 1
    best_through = np.empty(m, np.int64)
    best_through[by_start] = np.maximum.reduceat(through, bounds)[0::2]
    return np.maximum(length - best_through, 0)


def path_bounds(trace: Trace, hops: tuple[np.ndarray, np.ndarray], g: PathGraph) -> dict[str, int]:
    """What bounds the path, moment by moment, from its first point to its last (ns).

    Along a chain: its work is host or device time, a synchronisation call's wait is a sync
    wait; a gap between operators on a CPU thread is host time when the thread is inside a
    frame or range then (framework and Python code run between operators), else idle.
    Across: a launch edge is launch queueing (launch to start), a sync edge a sync wait, an
    explicit dependency idle.
    """
    pts = g.pts
    path, edge_in = hops
    pa, pb = g.anchors[path[:-1]], g.anchors[path[1:]]
    etype = g.e_type[edge_in[1:]]
    span = pts.time[pb] - pts.time[pa]
    queued = (etype == LAUNCH) | (etype == QUEUE)
    out = dict.fromkeys(BOUNDS, 0)
    out["launch_queueing"] = int(span[queued].sum())
    out["sync_wait"] = int(span[etype == SYNC].sum())
    out["idle"] = int(span[~queued & (etype != SYNC) & (etype != 0)].sum())
    # Along chains: every piece between the hop's two points.
    seg = _ranges(pa[etype == 0], pb[etype == 0])
    gap = pts.time[seg + 1] - pts.time[seg]
    own = g.owner[seg]
    has = own >= 0
    work = g.weight[seg] > 0
    dev = np.zeros(len(seg), bool)
    dev[has] = trace.on_device[g.sel[own[has]]]
    sync = np.zeros(len(seg), bool)
    sync[has] = (trace.flags[g.sel[own[has]]] & FLAG_SYNC) != 0
    out["device"] += int(gap[work & dev].sum())
    out["host"] += int(gap[work & ~dev].sum())
    out["sync_wait"] += int(gap[~work & sync].sum())
    idle = seg[~work & ~sync & (gap > 0)]
    in_code = _inside_context(trace, pts, idle)
    lengths = pts.time[idle + 1] - pts.time[idle]
    out["host"] += int(lengths[in_code].sum())
    out["idle"] += int(lengths[~in_code].sum())
    return out


def _inside_context(trace: Trace, pts: Points, pieces: np.ndarray) -> np.ndarray:
    """Per chain piece (point position): whether a frame or range is open on its CPU thread."""
    out = np.zeros(len(pieces), bool)
    track = trace.track[pts.event[pieces]]
    host = ~trace.on_device[pts.event[pieces]]
    for t in distinct(track[host]):
        mine = np.flatnonzero(host & (track == t))
        starts, ends = trace.context_intervals(t)
        mid = pts.time[pieces[mine]] + (pts.time[pieces[mine] + 1] - pts.time[pieces[mine]]) // 2
        out[mine] = covered(starts, ends, mid)
    return out


_CHAIN = -1  # a step reached along its chain: "nested" or "sequence", decided afterwards


def _walk(hops: tuple[np.ndarray, np.ndarray], g: PathGraph):
    """Expand the anchor path into the ordered events it passes through.

    Each hop along a chain visits the owners of its pieces that carry work, then the point
    it arrives at; a hop across chains visits its source (the edge's weight, launch
    queueing, is on the launching call's account) and its target. Consecutive visits of
    one event merge into one step.
    """
    pts = g.pts
    path, edge_in = hops
    pa, pb = g.anchors[path[:-1]], g.anchors[path[1:]]
    edge = edge_in[1:]
    etype = g.e_type[edge]
    hop = np.arange(len(edge))
    along = etype == 0
    seg = _ranges(pa[along], pb[along])
    seg_hop = np.repeat(hop[along], pb[along] - pa[along])
    keep = g.weight[seg] > 0
    seg, seg_hop = seg[keep], seg_hop[keep]
    cross = ~along
    parts = [  # (hop, order within the hop, local slice, weight, how)
        (np.array([-1]), np.zeros(1, np.int64), pts.local[g.anchors[path[:1]]], np.zeros(1, np.int64), [_CHAIN]),
        (seg_hop, np.zeros(len(seg), np.int64), g.owner[seg], g.weight[seg], np.full(len(seg), _CHAIN)),
        (hop[along], np.ones(int(along.sum()), np.int64), pts.local[pb[along]], np.zeros(int(along.sum()), np.int64),
         np.full(int(along.sum()), _CHAIN)),
        (hop[cross], np.zeros(int(cross.sum()), np.int64), pts.local[pa[cross]], g.e_w[edge[cross]],
         np.full(int(cross.sum()), _CHAIN)),
        (hop[cross], np.ones(int(cross.sum()), np.int64), pts.local[pb[cross]], np.zeros(int(cross.sum()), np.int64),
         etype[cross]),
    ]
    hop_of, sub, local, weight, how = (np.concatenate([np.asarray(p[k], np.int64) for p in parts]) for k in range(5))
    order = np.lexsort((sub, hop_of))  # stable: pieces keep their chain order
    local, weight, how = local[order], weight[order], how[order]
    first = np.flatnonzero(np.concatenate([[True], local[1:] != local[:-1]]))
    steps_local = local[first]
    on_path = np.add.reduceat(weight, first)
    how = how[first]
    parent_local = _parent_local(g)
    prev, cur = steps_local[:-1], steps_local[1:]
    nested = _encloses(parent_local, cur, prev) | _encloses(parent_local, prev, cur)
    # The labels are shared strings: a path of millions of steps holds one pointer each.
    via = ["start"] + [EDGE_TYPES[h] if h != _CHAIN else ("nested" if n else "sequence")
                       for h, n in zip(how[1:].tolist(), nested.tolist())]
    return g.sel[steps_local], on_path.astype(np.int64), via


def _parent_local(g: PathGraph) -> np.ndarray:
    """Per selected slice: the local index of its enclosing selected slice (-1: none)."""
    parent = g.pts.parent
    return np.where(parent >= 0, np.searchsorted(g.sel, parent), -1)  # sel is sorted


def _encloses(parent_local: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Per pair: whether slice ``a`` is an ancestor of slice ``b`` (local indices)."""
    hit = np.zeros(len(a), bool)
    q = parent_local[b] if len(b) else np.zeros(0, np.int64)
    while (q >= 0).any():
        hit |= q == a
        q = np.where(q >= 0, parent_local[np.maximum(q, 0)], -1)
    return hit
