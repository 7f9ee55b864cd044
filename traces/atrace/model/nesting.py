"""Nesting of slices on a track, computed without a Python loop per event.

Every slice contributes two points, its start and its end. Sorting the points of a track
by time (ends before starts at the same instant, children closing before their parents)
gives the order in which a stack machine would see them; the running count of open slices
is then a cumulative sum, a slice's depth is that count at its start, and its parent is
the last slice opened one level up before it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np


class _Lane(Protocol):
    ordered: bool  # events on it run one after another (False: independent lanes)


class TimedEvents(Protocol):
    """What nesting reads of a trace (`traces.atrace.model.trace.Trace` has it): this module
    imports nothing of trace.py, which calls it."""

    ts: np.ndarray
    dur: np.ndarray
    track: np.ndarray

    @property
    def tracks(self) -> Sequence[_Lane]: ...

    @property
    def end(self) -> np.ndarray: ...


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


def chain_ids(trace: TimedEvents, sel: np.ndarray) -> np.ndarray:
    """Chains are tracks, except on unordered tracks where each event is its own chain."""
    chain = trace.track[sel].astype(np.int64)
    unordered = [i for i, t in enumerate(trace.tracks) if not t.ordered]
    if unordered:
        lone = np.isin(chain, np.array(unordered, np.int64))
        chain[lone] = len(trace.tracks) + np.arange(int(lone.sum()))
    return chain


def order_points(trace: TimedEvents, sel: np.ndarray, chain: np.ndarray | None = None, *, full: bool = True) -> Points:
    """The points of the slices ``sel``, ordered; ``full=False`` gives only the nesting
    (depth, parent, start and end positions), not the per-point arrays, in less memory."""
    sel = np.asarray(sel, np.int64)
    if chain is None:
        chain = chain_ids(trace, sel)
    m = len(sel)
    ts = trace.ts[sel]
    dur = trace.dur[sel]
    end = ts + dur
    # Rank of each slice on its chain: by start, longer first (parents before children).
    ties = (-dur,) if m < 2 or (sel[1:] > sel[:-1]).all() else (sel, -dur)  # a stable sort keeps sel's order
    ev_key = chain_time(chain, ts, end)
    ev_order = sort_keys((*ties, *ev_key))
    rank = np.empty(m, np.int64)
    rank[ev_order] = np.arange(m)
    zero = dur == 0
    # Points: m starts, then m ends. Type 0: end of a non-empty slice; type 1: starts, and
    # ends of empty slices; then by rank (starts in rank order, ends of non-empty slices in
    # reverse). Within a chain, by time first.
    sec = np.empty(2 * m, np.int64)
    np.multiply(rank, 2, out=sec[:m])
    sec[:m] += 3 * m + 1
    sec[m:] = np.where(zero, 3 * m + 2 + 2 * rank, -rank)
    sec += m
    del rank, zero
    if len(ev_key) == 1:  # one key per point: chain * span + time offset (see _chain_time)
        key = np.empty(2 * m, np.int64)
        key[:m] = ev_key[0]
        np.add(ev_key[0], dur, out=key[m:])
        del ev_key
        order = sort_keys((sec, key))
    else:
        order = np.lexsort((sec, np.concatenate([ts, end]), np.concatenate([chain, chain])))
    del sec
    is_end = order >= m
    starts = np.flatnonzero(~is_end)
    ends = np.flatnonzero(is_end)
    start_pos = np.empty(m, np.int64)
    end_pos = np.empty(m, np.int64)
    start_pos[order[starts]] = starts
    end_pos[order[ends] - m] = ends
    # Open slices after a start = starts so far - ends so far: for the k-th start, at
    # position p, that is (k + 1) - (p - k); its depth is one less.
    depth = np.empty(m, np.int64)
    depth[order[starts]] = 2 * np.arange(m) - starts
    del starts, ends
    parent_local = _parents(depth, start_pos, chain)
    _fix_partial_overlaps(parent_local, depth, end, ts, chain, ev_order)
    parent = np.where(parent_local >= 0, sel[np.maximum(parent_local, 0)], -1)
    if not full:
        empty = np.zeros(0, np.int64)
        return Points(empty, empty, is_end, empty, empty, sel, depth, parent, start_pos, end_pos)
    local = np.where(is_end, order - m, order)
    return Points(
        event=sel[local],
        local=local,
        is_end=is_end,
        time=np.where(is_end, end[local], ts[local]),
        chain=chain[local],
        sel=sel,
        depth=depth,
        parent=parent,
        start_pos=start_pos,
        end_pos=end_pos,
    )


def sort_keys(keys: tuple[np.ndarray, ...]) -> np.ndarray:
    """``np.lexsort(keys)``, faster for two keys whose last (the primary) is nearly sorted
    with few ties, as a trace's times on its threads are: a stable argsort of the primary,
    then only the runs of equal primaries are sorted by the secondary (and position)."""
    if len(keys) != 2 or len(keys[1]) < 2:
        return np.lexsort(keys)
    secondary, primary = keys
    order = np.argsort(primary, kind="stable")
    p = primary[order]
    tie = p[1:] == p[:-1]
    if tie.any():
        in_run = np.zeros(len(p), bool)
        in_run[1:] |= tie
        in_run[:-1] |= tie
        pos = np.flatnonzero(in_run)
        idx = order[pos]
        order[pos] = idx[np.lexsort((idx, secondary[idx], p[pos]))]
    return order


def chain_time(chain: np.ndarray, time: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, ...]:
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
    first = set(np.flatnonzero(np.diff(stretch[bad[stretch]], prepend=-1)).tolist())
    # The stack holds positions in ``redo``; only the redone slices' times are read.
    index, end_of, ts_of = redo.tolist(), end[redo].tolist(), ts[redo].tolist()
    new_parent, new_depth = [-1] * len(index), [0] * len(index)
    stack: list[int] = []
    for k in range(len(index)):
        if k in first:
            stack = []
        while stack and end_of[stack[-1]] <= ts_of[k]:
            stack.pop()
        if stack:
            new_parent[k] = index[stack[-1]]
            new_depth[k] = new_depth[stack[-1]] + 1
        stack.append(k)
    parent[redo] = new_parent
    depth[redo] = new_depth


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


def compute_nesting(trace: TimedEvents, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(parent, depth) for every event; events outside ``mask`` get (-1, 0)."""
    n = len(trace)
    parent = np.full(n, -1, np.int64)
    depth = np.zeros(n, np.int64)
    sel = np.flatnonzero(mask)
    if len(sel):
        pts = order_points(trace, sel, full=False)
        parent[sel] = pts.parent
        depth[sel] = pts.depth
    return parent, depth


def self_times(trace: TimedEvents, parent: np.ndarray, mask: np.ndarray) -> np.ndarray:
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
