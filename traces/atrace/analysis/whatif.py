"""What-ifs on the critical path: how long the path of a window (a step, or the whole trace)
would be if some work took no time, some launches did not queue, or some synchronisations
did not wait.

The path graph (:mod:`.path_graph`) is built once per window, with one change: on the host
threads that drive the device (those that launch device work in the window, and the step's
own thread) the time between operators inside a Python frame or range weighs what it lasts
— framework and Python code, which is what a launch-bound step spends most of its time on
(the critical path itself counts it only in its bounds). Each what-if changes weights or
drops edges and runs the longest path again (the anchors' order stays valid: nothing is
added). The difference between the path's length and the what-if's is the time the change
could save on this path: an upper bound of what fixing the cause recovers, since the work
that stays still takes its time and every other path is as long as it was.

* ``work``: the self time of these slices weighs nothing (a host operator tree that
  dispatches device work, a copy, a collective, a kernel);
* ``pieces``: these pieces of the chains weigh nothing (``context_pieces`` selects the
  framework time of a thread, outside given intervals);
* ``launches``: the launch queueing of this device work weighs nothing (launched ahead, or
  replayed from a graph);
* ``syncs``: these synchronisation calls do not wait (their sync edges are dropped).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..model.stats import covered, covered_before
from ..model.trace import FLAG_LAUNCH, Kind, Trace
from .paths.critical_path import anchor_path, path_bounds, select_work
from .paths.graph import LAUNCH, SYNC, PathGraph, build_graph
from .paths.longest_path import longest_distances, longest_paths, topological_order


@dataclass
class PathModel:
    """One window's path graph, its critical path and what-ifs on it."""

    trace: Trace
    window: tuple[int, int] | None
    sel: np.ndarray  # the slices the path may run through (sorted global indices)
    drivers: list[int]  # host tracks that drive the device (their framework time weighs)
    graph: PathGraph
    order: np.ndarray
    weight: np.ndarray  # per point: the piece's weight, framework time included
    context: np.ndarray  # per point: the piece is framework time on a driving thread
    length_ns: int
    bounds_ns: dict[str, int]
    on_path_ns: np.ndarray  # per selected slice: its work on the critical path
    context_on_path_ns: int
    queued_busy_ns: int = 0  # launch queueing on the path while the devices were busy
    path_points: np.ndarray | None = None  # per point: its piece is on the critical path
    path_edges: np.ndarray | None = None  # per edge: the critical path takes it
    _n_along: int = 0
    _cache: dict = field(default_factory=dict, repr=False)

    # -- questions ---------------------------------------------------------------------
    def local(self, events: np.ndarray) -> np.ndarray:
        """Positions in ``sel`` of those of ``events`` the window selected."""
        events = np.asarray(events, np.int64)
        k = np.searchsorted(self.sel, events)
        ok = k < len(self.sel)
        ok[ok] &= self.sel[k[ok]] == events[ok]
        return k[ok]

    def parents(self) -> np.ndarray:
        """Per selected slice: the local index of its enclosing selected slice (-1: none)."""
        got = self._cache.get("parents")
        if got is None:
            p = self.graph.pts.parent
            got = self._cache["parents"] = np.where(p >= 0, np.searchsorted(self.sel, np.maximum(p, 0)), -1)
        return got

    def roots(self) -> np.ndarray:
        """Per selected slice: the local index of its outermost enclosing selected slice."""
        got = self._cache.get("roots")
        if got is None:
            parent = self.parents()
            up = np.where(parent >= 0, parent, np.arange(len(parent)))
            while True:
                nxt = up[up]
                if np.array_equal(nxt, up):
                    break
                up = nxt
            got = self._cache["roots"] = up
        return got

    def on_path(self, events: np.ndarray) -> int:
        """The work of ``events`` on the critical path (ns)."""
        return int(self.on_path_ns[self.local(events)].sum())

    def context_pieces(self, tracks: list[int] | None = None, *, outside: tuple[np.ndarray, np.ndarray] | None = None) -> np.ndarray:
        """Per point: framework-time pieces (of ``tracks``, default all driving threads),
        leaving out those inside the sorted disjoint intervals ``outside``."""
        mask = self.context.copy()
        pts = self.graph.pts
        if tracks is not None:
            mask &= np.isin(self.trace.track[pts.event], tracks)
        if outside is not None and len(outside[0]) and mask.any():
            k = np.flatnonzero(mask)
            mid = pts.time[k] + (pts.time[np.minimum(k + 1, len(pts.time) - 1)] - pts.time[k]) // 2
            mask[k[covered(outside[0], outside[1], mid)]] = False
        return mask

    def pieces_of(self, events: np.ndarray) -> np.ndarray:
        """Per point: the pieces owned by ``events`` (their self time)."""
        own = np.zeros(len(self.sel) + 1, bool)
        own[self.local(events)] = True
        return own[self.graph.owner]  # owner -1 reads the last slot (False)

    # -- what-ifs ----------------------------------------------------------------------
    def length_without(
        self,
        *,
        work: np.ndarray | None = None,
        pieces: np.ndarray | None = None,
        launches: np.ndarray | None = None,
        syncs: np.ndarray | None = None,
    ) -> int:
        """The path's length (ns) with the given work, pieces, launch queueing and waits
        removed."""
        g = self.graph
        zero = np.zeros(len(self.weight), bool) if pieces is None else pieces.copy()
        if work is not None and len(work):
            zero |= self.pieces_of(work)
        touched = bool((zero & self.path_points).any())
        target = g.pts.event[g.anchors[g.e_dst]]
        hit = drop = None
        if launches is not None and len(launches):
            hit = (g.e_type == LAUNCH) & np.isin(target, launches)
            touched |= bool((hit & self.path_edges).any())
        if syncs is not None and len(syncs):
            drop = (g.e_type == SYNC) & np.isin(target, syncs)
            touched |= bool((drop & self.path_edges).any())
        if not touched:  # nothing the critical path uses: it stays the longest
            return self.length_ns
        e_w = _edge_weights(g, np.where(zero, 0, self.weight), self._n_along)
        if hit is not None:
            e_w[hit] = 0
        src, dst = g.e_src, g.e_dst
        if drop is not None:
            src, dst, e_w = src[~drop], dst[~drop], e_w[~drop]
        dist = longest_distances(self.order, src, dst, e_w, len(g.anchors))
        return int(dist.max()) if len(dist) else 0

    def saving(self, **what: np.ndarray | None) -> int:
        """How much shorter the path is with ``what`` removed (see :meth:`length_without`)."""
        return max(self.length_ns - self.length_without(**what), 0)


def path_model(trace: Trace, window: tuple[int, int] | None, pairs: tuple[np.ndarray, np.ndarray],
               *, also_drivers: tuple[int, ...] = (), busy: tuple[np.ndarray, np.ndarray] | None = None,
               ) -> PathModel | None:
    """The path model of a window (None: the whole trace); None if it holds no work.

    The host tracks whose framework time weighs (the *drivers*) are those that launch
    device work in the window, and ``also_drivers`` (the step's own thread). ``busy``, the
    union of the trace's device work, tells launch queueing that waited behind busy
    devices (work from before the window) from launch latency (``queued_busy_ns``)."""
    sel = select_work(trace, window, pairs)
    if not len(sel):
        return None
    g = build_graph(trace, sel, pairs)
    n_along = int((g.e_type == 0).sum())
    launching = sel[((trace.flags[sel] & FLAG_LAUNCH) != 0) & ~trace.on_device[sel]]
    drivers = sorted(set(np.unique(trace.track[launching]).tolist()) | set(also_drivers))
    context = _context_pieces(trace, g, drivers)
    weight = g.weight + np.where(context, _gaps(g), 0)
    e_w = _edge_weights(g, weight, n_along)
    na = len(g.anchors)
    order = topological_order(g.anchors, g.pts.time, g.e_src, g.e_dst, na)
    dist, pred, pred_edge, _ = longest_paths(order, g.e_src, g.e_dst, e_w, na, with_tail=False)
    best = int(np.argmax(dist))
    hops = anchor_path(best, pred, pred_edge)
    on_path, ctx_on_path = _work_on_path(g, hops, weight, context)
    points, edges = _path_use(g, hops)
    return PathModel(
        path_points=points,
        path_edges=edges,
        queued_busy_ns=_queued_while_busy(g, hops, busy),
        trace=trace,
        window=window,
        sel=sel,
        drivers=drivers,
        graph=g,
        order=order,
        weight=weight,
        context=context,
        length_ns=int(dist[best]),
        bounds_ns=path_bounds(trace, hops, g),
        on_path_ns=on_path,
        context_on_path_ns=ctx_on_path,
        _n_along=n_along,
    )


def _gaps(g: PathGraph) -> np.ndarray:
    """Per point: the time to the next point of its chain (0 at a chain's last point)."""
    pts = g.pts
    gap = np.zeros(len(pts.time), np.int64)
    same = pts.chain[1:] == pts.chain[:-1]
    gap[:-1] = np.where(same, pts.time[1:] - pts.time[:-1], 0)
    return gap


def _context_pieces(trace: Trace, g: PathGraph, tracks: list[int]) -> np.ndarray:
    """Per point: no selected slice is open after it on a driving thread, but a frame,
    range or operator is (framework and Python code between operators)."""
    pts = g.pts
    out = np.zeros(len(pts.time), bool)
    if not tracks:
        return out
    gap = _gaps(g)
    candidates = np.flatnonzero((g.owner < 0) & (gap > 0))
    track = trace.track[pts.event[candidates]]
    for t in tracks:
        mine = candidates[track == t]
        if not len(mine):
            continue
        starts, ends = trace.context_intervals(t)
        out[mine[covered(starts, ends, pts.time[mine] + gap[mine] // 2)]] = True
    return out


def _path_use(g: PathGraph, hops) -> tuple[np.ndarray, np.ndarray]:
    """Which pieces and which edges the critical path uses."""
    path, edge_in = hops
    points = np.zeros(len(g.pts.time), bool)
    edges = np.zeros(len(g.e_src), bool)
    if len(path) < 2:
        return points, edges
    edges[edge_in[1:]] = True
    pa, pb = g.anchors[path[:-1]], g.anchors[path[1:]]
    along = g.e_type[edge_in[1:]] == 0
    n = pb[along] - pa[along]
    if n.sum():
        points[np.repeat(pa[along] - (np.cumsum(n) - n), n) + np.arange(int(n.sum()))] = True
    return points, edges


def _queued_while_busy(g: PathGraph, hops, busy) -> int:
    """The launch queueing on the path during which device work ran (the launch waited
    behind it: device-bound time, not launch latency)."""
    path, edge_in = hops
    if busy is None or len(path) < 2 or not len(busy[0]):
        return 0
    launch = g.e_type[edge_in[1:]] == LAUNCH
    a = g.pts.time[g.anchors[path[:-1]][launch]]
    b = g.pts.time[g.anchors[path[1:]][launch]]
    starts, ends = busy
    return int((covered_before(starts, ends, b) - covered_before(starts, ends, a)).sum())


def _edge_weights(g: PathGraph, weight: np.ndarray, n_along: int) -> np.ndarray:
    """The edges' weights with the chains' pieces weighing ``weight``."""
    before = np.zeros(len(weight) + 1, np.int64)
    np.cumsum(weight, out=before[1:])
    e_w = g.e_w.copy()
    e_w[:n_along] = before[g.anchors[g.e_dst[:n_along]]] - before[g.anchors[g.e_src[:n_along]]]
    return e_w


def _work_on_path(g: PathGraph, hops, weight: np.ndarray, context: np.ndarray) -> tuple[np.ndarray, int]:
    """Per selected slice: the weight of its pieces along the path's chain hops; and the
    framework time on the path."""
    path, edge_in = hops
    out = np.zeros(len(g.sel), np.int64)
    if len(path) < 2:
        return out, 0
    pa, pb = g.anchors[path[:-1]], g.anchors[path[1:]]
    along = g.e_type[edge_in[1:]] == 0
    n = pb[along] - pa[along]
    total = int(n.sum())
    if not total:
        return out, 0
    seg = np.repeat(pa[along] - (np.cumsum(n) - n), n) + np.arange(total)
    own = g.owner[seg]
    has = own >= 0
    np.add.at(out, own[has], weight[seg][has])
    return out, int(weight[seg][context[seg]].sum())


def communication_on_path(model: PathModel) -> int:
    """Communication work on the window's critical path (ns)."""
    comm = model.trace.kind[model.sel] == Kind.COMM
    return int(model.on_path_ns[comm].sum())
