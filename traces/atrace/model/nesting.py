"""Nesting of slices on a track, computed without a Python loop per event.

Every slice contributes two points, its start and its end. Sorting the points of a track
by time (ends before starts at the same instant, children closing before their parents)
gives the order in which a stack machine would see them; the running count of open slices
is then a cumulative sum, a slice's depth is that count at its start, and its parent is
the last slice opened one level up before it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # annotations only: trace.py loads this module lazily
    from .trace import Trace


@dataclass
class Points:
    """Start and end points of a set of slices, sorted chain by chain in time order."""

    event: np.ndarray  # global event index of each point
    local: np.ndarray  # index into ``sel`` of each point's event
    is_end: np.ndarray  # bool: end point (else start)
    time: np.ndarray  # ns
    chain: np.ndarray  # chain id of each point
    sel: np.ndarray  # the selected events (global indices), in the caller's order
    depth: np.ndarray  # per selected event
    parent: np.ndarray  # per selected event: global index of the parent, -1 if none
    start_pos: np.ndarray  # per selected event: position of its start point in the order
    end_pos: np.ndarray  # per selected event: position of its end point in the order


def chain_ids(trace: Trace, sel: np.ndarray) -> np.ndarray:
    """Chains are tracks, except on unordered tracks where each event is its own chain."""
    chain = trace.track[sel].astype(np.int64)
    unordered = [i for i, t in enumerate(trace.tracks) if not t.ordered]
    if unordered:
        lone = np.isin(chain, np.array(unordered, np.int64))
        chain[lone] = len(trace.tracks) + np.arange(int(lone.sum()))
    return chain


def order_points(trace: Trace, sel: np.ndarray, chain: np.ndarray | None = None) -> Points:
    sel = np.asarray(sel, np.int64)
    if chain is None:
        chain = chain_ids(trace, sel)
    m = len(sel)
    ts = trace.ts[sel]
    dur = trace.dur[sel]
    end = ts + dur
    # Rank of each slice on its chain: by start, longer first (parents before children).
    ties = (-dur,) if m < 2 or (sel[1:] > sel[:-1]).all() else (sel, -dur)  # a stable sort keeps sel's order
    ev_order = np.lexsort((*ties, *_chain_time(chain, ts, end)))
    rank = np.empty(m, np.int64)
    rank[ev_order] = np.arange(m)
    zero = dur == 0
    pt_time = np.concatenate([ts, end])
    pt_chain = np.concatenate([chain, chain])
    # type 0: end of a non-empty slice; type 1: starts, and ends of empty slices; then by
    # rank (starts in rank order, ends of non-empty slices in reverse).
    pt_type = np.concatenate([np.ones(m, np.int64), zero.astype(np.int64)])
    pt_sec = np.concatenate([2 * rank, np.where(zero, 2 * rank + 1, -rank)])
    order = np.lexsort((pt_type * (3 * m + 1) + pt_sec + m, *_chain_time(pt_chain, pt_time, pt_time)))
    local = order % m if m else order
    is_end = order >= m
    delta = np.where(is_end, -1, 1).astype(np.int64)
    open_after = np.cumsum(delta)
    start_pos = np.empty(m, np.int64)
    end_pos = np.empty(m, np.int64)
    positions = np.arange(2 * m)
    start_pos[local[~is_end]] = positions[~is_end]
    end_pos[local[is_end]] = positions[is_end]
    depth = open_after[start_pos] - 1 if m else np.zeros(0, np.int64)
    parent_local = _parents(depth, start_pos, chain)
    _fix_partial_overlaps(parent_local, depth, end, ts, chain, ev_order)
    parent = np.where(parent_local >= 0, sel[np.maximum(parent_local, 0)], -1)
    return Points(
        event=sel[local],
        local=local,
        is_end=is_end,
        time=pt_time[order],
        chain=pt_chain[order],
        sel=sel,
        depth=depth,
        parent=parent,
        start_pos=start_pos,
        end_pos=end_pos,
    )


def _chain_time(chain: np.ndarray, time: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, ...]:
    """Sort keys (least significant first) for "by chain, then by time": one int64 key when
    chain and time offset fit in it together (they do for any trace shorter than days), else
    two keys."""
    if not len(time):
        return time, chain
    t0 = int(time.min())
    span = int(end.max()) - t0 + 1
    chains = int(chain.max()) + 1
    if int(chain.min()) >= 0 and span * chains < (1 << 62):
        return (chain.astype(np.int64) * span + (time - t0),)
    return time, chain


def _parents(depth: np.ndarray, start_pos: np.ndarray, chain: np.ndarray) -> np.ndarray:
    """Local index of each slice's parent: the last slice one level up opened before it."""
    m = len(depth)
    parent = np.full(m, -1, np.int64)
    if not m:
        return parent
    by_depth = np.lexsort((start_pos, depth))
    d_sorted = depth[by_depth]
    bounds = np.searchsorted(d_sorted, np.arange(int(d_sorted[-1]) + 2))
    for d in range(1, int(d_sorted[-1]) + 1):
        cur = by_depth[bounds[d] : bounds[d + 1]]
        up = by_depth[bounds[d - 1] : bounds[d]]
        if not len(cur) or not len(up):
            continue
        k = np.searchsorted(start_pos[up], start_pos[cur]) - 1
        ok = k >= 0
        cand = up[np.maximum(k, 0)]
        ok &= chain[cand] == chain[cur]
        parent[cur[ok]] = cand[ok]
    return parent


def _fix_partial_overlaps(parent, depth, end, ts, chain, ev_order) -> None:
    """Redo the nesting where a slice outlives its parent (in place).

    Depth by counting open slices assumes proper nesting. Real traces break it now and then
    (a ``ProfilerStep`` range that begins inside the Python frame that opened it and ends
    long after). There a stack decides: the parent of a slice is the latest-started slice of
    its chain that is still open when it starts. Only the stretches of a chain that hold
    such a slice are redone: a stretch ends when every slice begun in it has ended.
    """
    child = np.flatnonzero(parent >= 0)
    outlives = child[end[child] > end[parent[child]]]
    if not len(outlives):
        return
    members = ev_order[np.isin(chain[ev_order], np.unique(chain[outlives]))]
    stretch = _stretches(members, chain, ts, end)
    bad = np.zeros(int(stretch[-1]) + 1, bool)
    at = np.empty(len(chain), np.int64)
    at[members] = stretch
    bad[at[outlives]] = True
    redo = members[bad[stretch]]
    starts = np.flatnonzero(np.diff(stretch[bad[stretch]], prepend=-1)).tolist()
    end_of, ts_of = end.tolist(), ts.tolist()
    stack: list[int] = []
    first = set(starts)
    for k, i in enumerate(redo.tolist()):
        if k in first:
            stack = []
        while stack and end_of[stack[-1]] <= ts_of[i]:
            stack.pop()
        parent[i] = stack[-1] if stack else -1
        depth[i] = depth[parent[i]] + 1 if stack else 0
        stack.append(i)


def _stretches(members: np.ndarray, chain: np.ndarray, ts: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Per member (slices of some chains, chain by chain in start order): the number of its
    stretch. A new stretch begins on a new chain and where every earlier slice has ended."""
    c, s, e = chain[members], ts[members], end[members]
    new = np.ones(len(members), bool)
    bounds = np.flatnonzero(np.diff(c, prepend=c[0] - 1) != 0).tolist() + [len(members)]
    for lo, hi in zip(bounds, bounds[1:]):
        ended = np.maximum.accumulate(e[lo : hi - 1])
        new[lo + 1 : hi] = s[lo + 1 : hi] >= ended
    return np.cumsum(new) - 1


def compute_nesting(trace: Trace, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(parent, depth) for every event; events outside ``mask`` get (-1, 0)."""
    n = len(trace)
    parent = np.full(n, -1, np.int64)
    depth = np.zeros(n, np.int64)
    sel = np.flatnonzero(mask)
    if len(sel):
        pts = order_points(trace, sel)
        parent[sel] = pts.parent
        depth[sel] = pts.depth
    return parent, depth


def self_times(trace: Trace, parent: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Duration minus the (clipped) durations of direct children, per event."""
    n = len(trace)
    child = np.flatnonzero(mask & (parent >= 0))
    p = parent[child]
    end = trace.end
    # A child that overruns its parent counts only up to the parent's end.
    clipped = np.minimum(end[child], end[p]) - np.maximum(trace.ts[child], trace.ts[p])
    clipped = np.maximum(clipped, 0)
    children = np.bincount(p, weights=clipped, minlength=n) if len(child) else np.zeros(n)
    return np.maximum(trace.dur - children.astype(np.int64), 0)
