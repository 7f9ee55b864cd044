"""The longest paths through a directed acyclic graph of anchors and weighted edges: the
critical path's core (see :mod:`.critical_path`), vectorised where the graph is a forest.
"""

from __future__ import annotations

import numpy as np

from ...errors import TraceGraphError


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
    return _best(order, e_dst, e_src, e_w, na, with_pred=False)[0]


def longest_paths(order, e_src, e_dst, e_w, na: int, *, with_tail: bool = True):
    """Longest path ending at (dist) and starting from (tail) each anchor, and per anchor
    the edge of its best path in (pred, pred_edge: the first in-edge that reaches ``dist``).

    Most anchors have a single edge in (a chain's next point) or out: their distance is the
    other end's plus the weight. Those edges form a forest, summed by pointer jumping; only
    anchors where several edges meet are visited one by one, in topological order.
    ``with_tail=False`` leaves the second half out (``tail`` is None).
    """
    dist, pred, pred_edge = _best(order, e_dst, e_src, e_w, na, with_pred=True)
    if not with_tail:
        return dist, pred, pred_edge, None
    tail, _, _ = _best(order[::-1], e_src, e_dst, e_w, na, with_pred=False)
    return dist, pred, pred_edge, tail


def _best(order, near, far, e_w, na: int, *, with_pred: bool):
    """Per anchor, the longest path over the edges whose ``near`` end it is (ending there
    when ``near`` is the edges' destination, starting there when it is their source),
    visiting anchors in ``order``; with the edge of the best path and its far end."""
    by_near = np.argsort(near, kind="stable")
    ptr = np.searchsorted(near[by_near], np.arange(na + 1))
    deg = np.diff(ptr)
    single = np.flatnonzero(deg == 1)
    only = by_near[ptr[single]]
    pred = pred_edge = None
    if with_pred:
        pred = np.full(na, -1, np.int64)
        pred_edge = np.full(na, -1, np.int64)
        pred[single], pred_edge[single] = far[only], only
    root, off = _forest(single, far[only], e_w[only], na)
    del single, only
    meet = order[deg[order] >= 2]
    del deg
    best_at, best_edge = _meet(meet, ptr, (root, off, far, e_w), by_near, na)
    del by_near, ptr
    if with_pred:
        pred_edge[meet] = best_edge
        pred[meet] = far[best_edge]
    return best_at[root] + off, pred, pred_edge


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


def _meet(meet: np.ndarray, ptr: np.ndarray, far: tuple, edges: np.ndarray, na: int):
    """Best distance at anchors where several edges meet, visited in the given order.

    ``far`` is (root, offset, far end, weight): each anchor's root and offset from it, and
    per edge its far end and weight; ``edges`` lists the edges grouped by anchor (``ptr``).
    Returns per anchor the best distance (roots only are meaningful) and, per ``meet``
    anchor, the first edge reaching it. Only the meeting anchors' edges are looked at, a
    block of anchors at a time: the loop reads Python lists (fast), and only one block's
    lists are alive at once (millions of edges as Python ints would cost ~80 bytes each).
    """
    root, off, far_end, weight = far
    lo, hi = ptr[meet], ptr[meet + 1]
    n = hi - lo
    first_of = np.zeros(len(meet) + 1, np.int64)
    np.cumsum(n, out=first_of[1:])
    mine = edges[np.repeat(lo - first_of[:-1], n) + np.arange(int(first_of[-1]))]
    del lo, hi
    best_at = [0] * na
    chosen = np.empty(len(meet), np.int64)
    for b0 in range(0, len(meet), _MEET_BLOCK):
        b1 = min(b0 + _MEET_BLOCK, len(meet))
        e0, e1 = int(first_of[b0]), int(first_of[b1])
        ends = far_end[mine[e0:e1]]
        far_root = root[ends].tolist()
        far_add = (off[ends] + weight[mine[e0:e1]]).tolist()
        del ends
        picks = []
        pick = picks.append
        first = 0
        for v, count in zip(meet[b0:b1].tolist(), n[b0:b1].tolist()):
            stop = first + count
            best, bj = best_at[far_root[first]] + far_add[first], first
            for j in range(first + 1, stop):
                d = best_at[far_root[j]] + far_add[j]
                if d > best:
                    best, bj = d, j
            best_at[v] = best
            pick(bj)
            first = stop
        chosen[b0:b1] = picks
        chosen[b0:b1] += e0
    return np.array(best_at, np.int64), mine[chosen]


_MEET_BLOCK = 1 << 17  # meeting anchors per block of :func:`_meet`
