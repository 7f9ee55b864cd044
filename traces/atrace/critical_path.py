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
* sync: the last device slice to finish inside a synchronisation call -> that call's end;
* dependency: the source's explicit edges (model graph data / control deps, flow events)
  -> from the end of one slice to the start of the other.

Every edge runs forward in time, so the graph is acyclic; the critical path is its longest
path, i.e. the causal chain that holds the most work. Its length is therefore at least the
busy time of any single thread or stream. A slice's *slack* is how much longer it could take
before the critical path grows: the path length minus the longest path through it.

For speed the chains are condensed: only points where a cross edge starts or ends (and the
chain ends) become graph nodes; the work between them is a prefix-sum difference.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .correlate import launch_pairs
from .errors import EmptyTraceError, TraceGraphError
from .model import FLAG_SYNC, KIND_NAMES, WORK_KINDS, Kind, Trace
from .stats import distribution, us
from .structure import Points, order_points

EDGE_TYPES = ("sequence", "nested", "launch", "sync", "data", "control", "flow")
_LAUNCH, _SYNC = 2, 3
_EXPLICIT = {0: 4, 1: 5, 2: 6}  # EdgeKind -> edge type


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
        return {
            "length_us": us(self.length_ns),
            "span_us": us(self.window[1] - self.window[0]),
            "window_us": [us(self.window[0]), us(self.window[1])],
            "steps_total": len(self.events),
            "steps_truncated": len(self.events) > max_steps,
            "steps": steps,
            "by_op": self.by_op(),
            "by_side": {
                "host_us": us(self.length_ns - dev_time),
                "device_us": us(dev_time),
            },
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


def _select(trace: Trace, window: tuple[int, int] | None) -> np.ndarray:
    work = trace.kind_mask(*WORK_KINDS) & trace.is_slice
    if window is None:
        return np.flatnonzero(work)
    t0, t1 = window
    inside = (trace.ts >= t0) & (trace.ts < t1)
    host = work & ~trace.on_device & inside
    # Device work belongs to the step whose host code launched it.
    rt, dev = launch_pairs(trace)
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
    sel = _select(trace, window)
    if not len(sel):
        raise EmptyTraceError("no work events to build a critical path from")
    pts = order_points(trace, sel)
    m = len(sel)
    n_pts = 2 * m
    loc = np.full(len(trace), -1, np.int64)
    loc[sel] = np.arange(m)

    # Chain segments: weight and owner of the piece after each point.
    parent_local = np.where(pts.parent >= 0, loc[np.maximum(pts.parent, 0)], -1)
    owner = np.where(pts.is_end, parent_local[pts.local], pts.local)
    same_chain = np.zeros(n_pts, bool)
    same_chain[:-1] = pts.chain[1:] == pts.chain[:-1]
    gap = np.zeros(n_pts, np.int64)
    gap[:-1] = pts.time[1:] - pts.time[:-1]
    is_sync = (trace.flags[sel] & FLAG_SYNC) != 0
    works = same_chain & (owner >= 0)
    works[works] &= ~is_sync[owner[works]]
    weight = np.where(works, gap, 0)
    prefix = np.zeros(n_pts + 1, np.int64)
    np.cumsum(weight, out=prefix[1:])
    W = prefix[:-1]  # work done on a chain before each point

    # Cross edges, as point positions.
    src, dst, etype = _cross_edges(trace, sel, loc, pts)

    # Anchors: chain ends and cross-edge endpoints.
    chain_first = np.ones(n_pts, bool)
    chain_first[1:] = ~same_chain[:-1]
    chain_last = ~same_chain
    anchors = np.unique(np.concatenate([np.flatnonzero(chain_first | chain_last), src, dst]))
    na = len(anchors)
    a_src = np.searchsorted(anchors, src)
    a_dst = np.searchsorted(anchors, dst)
    along = pts.chain[anchors[1:]] == pts.chain[anchors[:-1]]
    c_src = np.flatnonzero(along)
    c_dst = c_src + 1
    c_w = W[anchors[c_dst]] - W[anchors[c_src]]
    e_src = np.concatenate([c_src, a_src])
    e_dst = np.concatenate([c_dst, a_dst])
    e_w = np.concatenate([c_w, np.zeros(len(a_src), np.int64)])
    e_type = np.concatenate([np.zeros(len(c_src), np.int64), etype])

    order = _topological_order(anchors, pts.time, e_src, e_dst, na)
    dist, pred, pred_edge, tail = _longest(order, e_src, e_dst, e_w, na)
    best = int(np.argmax(dist))
    length = int(dist[best])

    events, on_path, via = _walk(best, pred, pred_edge, anchors, e_src, e_type, pts, sel, weight, owner)

    # Slack: path length minus the longest path through each slice.
    anchor_before = np.searchsorted(anchors, np.arange(n_pts), "right") - 1
    anchor_after = np.searchsorted(anchors, np.arange(n_pts), "left")
    through = (
        dist[anchor_before] + (W - W[anchors[anchor_before]])
        + tail[anchor_after] + (W[anchors[anchor_after]] - W)
    )
    # Range maximum per slice; slices in start order keep the in-between ranges short.
    by_start = np.argsort(pts.start_pos)
    bounds = np.empty(2 * m, np.int64)
    bounds[0::2] = pts.start_pos[by_start]
    bounds[1::2] = pts.end_pos[by_start] + 1
    through = np.append(through, 0)
    best_through = np.empty(m, np.int64)
    best_through[by_start] = np.maximum.reduceat(through, bounds)[0::2]
    slack = np.maximum(length - best_through, 0)
    if window is None:
        window = trace.span()
    return CriticalPath(
        trace=trace,
        length_ns=length,
        events=events,
        on_path_ns=on_path,
        via=via,
        selected=sel,
        slack_ns=slack,
        window=window,
    )


def _cross_edges(trace: Trace, sel: np.ndarray, loc: np.ndarray, pts: Points):
    ts, end = trace.ts, trace.end
    srcs, dsts, types = [], [], []

    def from_point(a: np.ndarray, z: np.ndarray) -> np.ndarray:
        """End of ``a`` if it ended before ``z`` started, else its start; -1 if neither."""
        la = loc[a]
        p = np.where(end[a] <= ts[z], pts.end_pos[la], pts.start_pos[la])
        return np.where(ts[a] <= ts[z], p, -1)

    # Launches.
    rt, dev = launch_pairs(trace)
    keep = (loc[rt] >= 0) & (loc[dev] >= 0)
    rt, dev = rt[keep], dev[keep]
    if len(rt):
        p = from_point(rt, dev)
        ok = p >= 0
        srcs.append(p[ok])
        dsts.append(pts.start_pos[loc[dev[ok]]])
        types.append(np.full(int(ok.sum()), _LAUNCH))
    # Synchronisation: the last device slice to finish while the call waited.
    sync = sel[((trace.flags[sel] & FLAG_SYNC) != 0) & ~trace.on_device[sel]]
    devs = sel[trace.on_device[sel]]
    if len(sync) and len(devs):
        devs = devs[np.argsort(end[devs], kind="stable")]
        dev_end = end[devs]
        k = np.searchsorted(dev_end, end[sync], "right") - 1
        ok = k >= 0
        ok[ok] &= dev_end[k[ok]] > ts[sync[ok]]
        srcs.append(pts.end_pos[loc[devs[k[ok]]]])
        dsts.append(pts.end_pos[loc[sync[ok]]])
        types.append(np.full(int(ok.sum()), _SYNC))
    # Explicit dependencies.
    if len(trace.edge_src):
        a, z = trace.edge_src, trace.edge_dst
        keep = (loc[a] >= 0) & (loc[z] >= 0) & (a != z)
        a, z, kind = a[keep], z[keep], trace.edge_kind[keep]
        p = from_point(a, z)
        ok = p >= 0
        srcs.append(p[ok])
        dsts.append(pts.start_pos[loc[z[ok]]])
        types.append(np.array([_EXPLICIT[int(x)] for x in kind[ok].tolist()], np.int64))
    if not srcs:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64)
    return np.concatenate(srcs), np.concatenate(dsts), np.concatenate(types)


def _topological_order(anchors, time, e_src, e_dst, na: int) -> np.ndarray:
    """Anchors in an order where every edge goes forward (time order, or Kahn on ties)."""
    order = np.lexsort((anchors, time[anchors]))
    rank = np.empty(na, np.int64)
    rank[order] = np.arange(na)
    if not len(e_src) or (rank[e_src] < rank[e_dst]).all():
        return order
    # Ties in time that the simple order gets wrong: Kahn's algorithm.
    indeg = np.bincount(e_dst, minlength=na).tolist()
    by_src = np.argsort(e_src, kind="stable")
    ptr = np.searchsorted(e_src[by_src], np.arange(na + 1)).tolist()
    dst_sorted = e_dst[by_src].tolist()
    ready = [int(x) for x in order.tolist() if indeg[x] == 0][::-1]
    out = []
    while ready:
        u = ready.pop()
        out.append(u)
        for j in range(ptr[u], ptr[u + 1]):
            v = dst_sorted[j]
            indeg[v] -= 1
            if indeg[v] == 0:
                ready.append(v)
    if len(out) != na:
        raise TraceGraphError("the dependency graph has a cycle (edges contradict the timeline)")
    return np.array(out, np.int64)


def _longest(order, e_src, e_dst, e_w, na: int):
    """Longest path ending at (dist) and starting from (tail) each anchor."""
    by_dst = np.argsort(e_dst, kind="stable")
    in_ptr = np.searchsorted(e_dst[by_dst], np.arange(na + 1)).tolist()
    in_src = e_src[by_dst].tolist()
    in_w = e_w[by_dst].tolist()
    in_id = by_dst.tolist()
    dist = [0] * na
    pred = [-1] * na
    pred_edge = [-1] * na
    for v in order.tolist():
        lo, hi = in_ptr[v], in_ptr[v + 1]
        best, bu, be = 0, -1, -1
        for j in range(lo, hi):
            d = dist[in_src[j]] + in_w[j]
            if d > best or (bu < 0 and d == best):
                best, bu, be = d, in_src[j], in_id[j]
        dist[v] = best
        pred[v] = bu
        pred_edge[v] = be
    by_src = np.argsort(e_src, kind="stable")
    out_ptr = np.searchsorted(e_src[by_src], np.arange(na + 1)).tolist()
    out_dst = e_dst[by_src].tolist()
    out_w = e_w[by_src].tolist()
    tail = [0] * na
    for u in order[::-1].tolist():
        best = 0
        for j in range(out_ptr[u], out_ptr[u + 1]):
            d = tail[out_dst[j]] + out_w[j]
            if d > best:
                best = d
        tail[u] = best
    return (np.array(dist, np.int64), np.array(pred, np.int64), np.array(pred_edge, np.int64),
            np.array(tail, np.int64))


def _walk(best, pred, pred_edge, anchors, e_src, e_type, pts: Points, sel, weight, owner):
    """Expand the anchor path into the ordered events it passes through."""
    chain_anchor = []
    v = best
    while v >= 0:
        chain_anchor.append((v, int(pred_edge[v])))
        v = int(pred[v])
    chain_anchor.reverse()
    events: list[int] = []
    on_path: list[int] = []
    via: list[str] = []
    parent_of = pts.parent  # per local index (global ids)

    def visit(local: int, w: int, how: str) -> None:
        e = int(sel[local])
        if events and events[-1] == e:
            on_path[-1] += w
            return
        if how == "chain" and events:
            prev = events[-1]
            how = "nested" if _is_ancestor(prev, local) else "sequence"
        events.append(e)
        on_path.append(w)
        via.append("start" if len(events) == 1 else how)

    parents = parent_of.tolist()
    sel_list = sel.tolist()
    local_of = {}

    def _is_ancestor(prev_global: int, local: int) -> bool:
        if not local_of:
            local_of.update({g: k for k, g in enumerate(sel_list)})
        prev_local = local_of.get(prev_global, -1)
        q = parents[prev_local] if prev_local >= 0 else -1
        return q == sel_list[local] or parents[local] == prev_global

    first_anchor = chain_anchor[0][0]
    visit(int(pts.local[anchors[first_anchor]]), 0, "chain")
    for (a, _), (b, edge) in zip(chain_anchor, chain_anchor[1:]):
        pa, pb = int(anchors[a]), int(anchors[b])
        etype = int(e_type[edge])
        if etype == 0:
            seg = np.arange(pa, pb)
            seg = seg[weight[seg] > 0]
            for i, w in zip(seg.tolist(), weight[seg].tolist()):
                visit(int(owner[i]), int(w), "chain")
            visit(int(pts.local[pb]), 0, "chain")
        else:
            visit(int(pts.local[pa]), 0, "chain")
            visit(int(pts.local[pb]), 0, EDGE_TYPES[etype])
    return np.array(events, np.int64), np.array(on_path, np.int64), via
