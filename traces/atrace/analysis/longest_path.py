"""The longest paths through a directed acyclic graph of anchors and weighted edges: the
critical path's core (see :mod:`.critical_path`), vectorised where the graph is a forest.
"""

from __future__ import annotations

import numpy as np

from ..errors import TraceGraphError


def topological_order(anchors, time, e_src, e_dst, na: int) -> np.ndarray:
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


def longest_distances(order, e_src, e_dst, e_w, na: int) -> np.ndarray:
    """The longest path ending at each anchor (the first half of :func:`longest_paths`)."""
    by_dst = np.argsort(e_dst, kind="stable")
    in_ptr = np.searchsorted(e_dst[by_dst], np.arange(na + 1))
    indeg = np.diff(in_ptr)
    single = np.flatnonzero(indeg == 1)
    only = by_dst[in_ptr[single]]
    root, off = _forest(single, e_src[only], e_w[only], na)
    meet = order[indeg[order] >= 2]
    best_at, _ = _meet(meet, in_ptr, (root[e_src], off[e_src] + e_w), by_dst, na)
    return best_at[root] + off


def longest_paths(order, e_src, e_dst, e_w, na: int, *, with_tail: bool = True):
    """Longest path ending at (dist) and starting from (tail) each anchor, and per anchor
    the edge of its best path in (pred, pred_edge: the first in-edge that reaches ``dist``).

    Most anchors have a single edge in (a chain's next point) or out: their distance is the
    other end's plus the weight. Those edges form a forest, summed by pointer jumping; only
    anchors where several edges meet are visited one by one, in topological order.
    ``with_tail=False`` leaves the second half out (``tail`` is None).
    """
    by_dst = np.argsort(e_dst, kind="stable")
    dst_sorted = e_dst[by_dst]
    in_ptr = np.searchsorted(dst_sorted, np.arange(na + 1))
    indeg = np.diff(in_ptr)
    pred = np.full(na, -1, np.int64)
    pred_edge = np.full(na, -1, np.int64)
    single = np.flatnonzero(indeg == 1)
    only = by_dst[in_ptr[single]]
    pred[single], pred_edge[single] = e_src[only], only
    root, off = _forest(single, e_src[only], e_w[only], na)
    meet = order[indeg[order] >= 2]
    best_at, best_edge = _meet(meet, in_ptr, (root[e_src] , off[e_src] + e_w), by_dst, na)
    pred_edge[meet] = best_edge
    pred[meet] = e_src[best_edge]
    dist = best_at[root] + off
    if not with_tail:
        return dist, pred, pred_edge, None

    by_src = np.argsort(e_src, kind="stable")
    out_ptr = np.searchsorted(e_src[by_src], np.arange(na + 1))
    outdeg = np.diff(out_ptr)
    single = np.flatnonzero(outdeg == 1)
    only = by_src[out_ptr[single]]
    root, off = _forest(single, e_dst[only], e_w[only], na)
    meet = order[::-1][outdeg[order[::-1]] >= 2]
    tail_at, _ = _meet(meet, out_ptr, (root[e_dst], off[e_dst] + e_w), by_src, na)
    return dist, pred, pred_edge, tail_at[root] + off


def _forest(child: np.ndarray, up_of: np.ndarray, weight: np.ndarray, na: int) -> tuple[np.ndarray, np.ndarray]:
    """Each anchor's root (following ``child -> up_of`` links up) and the weight summed on
    the way, by pointer jumping: log2(depth) numpy passes."""
    up = np.arange(na)
    acc = np.zeros(na, np.int64)
    up[child] = up_of
    acc[child] = weight
    while True:
        nxt = up[up]
        if np.array_equal(nxt, up):
            return up, acc
        acc = acc + acc[up]
        up = nxt


def _meet(meet: np.ndarray, ptr: np.ndarray, far: tuple[np.ndarray, np.ndarray], edges: np.ndarray, na: int):
    """Best distance at anchors where several edges meet, visited in the given order.

    ``far`` gives per edge the root of its far end and the far end's offset from that root
    plus the edge's weight; ``edges`` lists the edges grouped by anchor (``ptr``). Returns
    per anchor the best distance (roots only are meaningful) and, per ``meet`` anchor, the
    first edge reaching it.
    """
    far_root = far[0][edges].tolist()
    far_add = far[1][edges].tolist()
    best_at = [0] * na
    chosen = []
    choose = chosen.append
    for v, first, stop in zip(meet.tolist(), ptr[meet].tolist(), ptr[meet + 1].tolist()):
        best, bj = best_at[far_root[first]] + far_add[first], first
        for j in range(first + 1, stop):
            d = best_at[far_root[j]] + far_add[j]
            if d > best:
                best, bj = d, j
        best_at[v] = best
        choose(bj)
    return np.array(best_at, np.int64), edges[np.array(chosen, np.int64)]
