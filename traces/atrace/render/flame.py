"""Flame (icicle) trees: host call stacks by call path, device work under the host path that
launched it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..model.links import launch_pairs
from ..model.nesting import self_times
from ..model.stats import us
from ..model.trace import Kind, Trace


@dataclass
class FlameTree:
    """A call tree: node i has ``parent[i]`` (-1 for roots), a label and totals."""

    labels: list[str]
    parent: np.ndarray
    total_ns: np.ndarray
    self_ns: np.ndarray
    count: np.ndarray

    def to_dict(self, max_nodes: int = 5000) -> dict[str, Any]:
        keep = np.arange(len(self.labels))
        if len(keep) > max_nodes:
            cut = np.sort(self.total_ns)[-max_nodes]
            keep = np.flatnonzero(self.total_ns >= cut)[:max_nodes]
            kept = np.zeros(len(self.labels), bool)
            kept[keep] = True
            # A node whose parent is gone is dropped too (children never outweigh parents,
            # but ties at the cut may split a family).
            keep = keep[(self.parent[keep] < 0) | kept[np.maximum(self.parent[keep], 0)]]
        ids = [str(i) for i in keep.tolist()]
        return {
            "ids": ids,
            "labels": [self.labels[i] for i in keep.tolist()],
            "parents": ["" if self.parent[i] < 0 else str(int(self.parent[i])) for i in keep.tolist()],
            "values_us": [us(v) for v in self.total_ns[keep].tolist()],
            "self_us": [us(v) for v in self.self_ns[keep].tolist()],
            "counts": self.count[keep].tolist(),
        }


@dataclass
class Flame:
    host: FlameTree
    device: FlameTree

    def to_dict(self, max_nodes: int = 5000) -> dict[str, Any]:
        return {"host": self.host.to_dict(max_nodes), "device": self.device.to_dict(max_nodes)}


def _paths(trace: Trace, events: np.ndarray, parent: np.ndarray, depth: np.ndarray, roots: np.ndarray):
    """Call-path id per event (by levels of nesting) and the path table."""
    n_str = len(trace.strings) + 1
    path_of = np.full(len(trace), -1, np.int64)
    p_parent: list[np.ndarray] = [np.full(len(np.unique(roots)), -1, np.int64)]
    root_ids, root_inv = np.unique(roots, return_inverse=True)
    p_label: list[np.ndarray] = [root_ids]
    next_id = len(root_ids)
    root_path = root_inv.astype(np.int64)
    d = depth[events]
    order = np.argsort(d, kind="stable")
    ev_sorted, d_sorted = events[order], d[order]
    bounds = np.searchsorted(d_sorted, np.arange(int(d_sorted.max(initial=0)) + 2))
    root_of = np.full(len(trace), -1, np.int64)
    root_of[events] = root_path
    for level in range(len(bounds) - 1):
        ev = ev_sorted[bounds[level] : bounds[level + 1]]
        if not len(ev):
            continue
        par = parent[ev]
        ppath = np.where(par >= 0, path_of[np.maximum(par, 0)], root_of[ev])
        ppath = np.where(ppath >= 0, ppath, root_of[ev])
        key = ppath * n_str + trace.op[ev]
        uniq, inv = np.unique(key, return_inverse=True)
        path_of[ev] = next_id + inv
        p_parent.append(uniq // n_str)
        p_label.append(-(uniq % n_str) - 1)  # negative: a string id (roots are positive keys)
        next_id += len(uniq)
    return path_of, np.concatenate(p_parent), np.concatenate(p_label)


def _tree(trace: Trace, labels_raw: np.ndarray, p_parent: np.ndarray, root_names: dict[int, str],
          events: np.ndarray, path_of: np.ndarray, total_w: np.ndarray, self_w: np.ndarray) -> FlameTree:
    n = len(p_parent)
    tot = np.bincount(path_of[events], weights=total_w, minlength=n)
    slf = np.bincount(path_of[events], weights=self_w, minlength=n)
    cnt = np.bincount(path_of[events], minlength=n)
    strings = trace.strings.strings
    labels = [strings[-x - 1] if x < 0 else root_names.get(int(x), str(x)) for x in labels_raw.tolist()]
    # Roots: the sum of their top-level children.
    roots = np.flatnonzero(p_parent < 0)
    child_of_root = np.isin(p_parent, roots)
    tot[roots] = 0
    np.add.at(tot, p_parent[child_of_root], tot[child_of_root])
    return FlameTree(labels, p_parent, tot, slf, cnt)


def flame(trace: Trace, *, window: tuple[int, int] | None = None) -> Flame:
    """Host call stacks aggregated by call path; device operators under the host path
    of the operator that launched them."""
    parent, depth = trace.nesting()
    slices = trace.is_slice
    in_win = slices if window is None else slices & (trace.ts >= window[0]) & (trace.ts < window[1])
    host = np.flatnonzero(in_win & ~trace.on_device)
    selfs = self_times(trace, parent, slices)
    roots = trace.track[host].astype(np.int64)
    path_of, p_parent, p_label = _paths(trace, host, parent, depth, roots)
    root_names = {i: trace.tracks[i].label for i in range(len(trace.tracks))}
    host_tree = _tree(trace, p_label, p_parent, root_names, host, path_of, trace.dur[host], selfs[host])
    dev = np.flatnonzero(in_win & trace.on_device & (trace.kind != Kind.ANNOTATION))
    device_tree = _device_tree(trace, dev, path_of, p_parent, p_label, root_names)
    return Flame(host=host_tree, device=device_tree)


def _device_tree(
    trace: Trace,
    dev: np.ndarray,
    path_of: np.ndarray,
    p_parent: np.ndarray,
    p_label: np.ndarray,
    root_names: dict[int, str],
) -> FlameTree:
    """Device operators ``dev`` under the host call path that launched each (host paths
    that lead to no device work left out), plus one root for unlaunched device work."""
    rt, dv = launch_pairs(trace)
    context = np.full(len(trace), -1, np.int64)
    context[dv] = path_of[rt]
    ctx = context[dev]
    n_str = len(trace.strings) + 1
    n_host = len(p_parent)
    # Host paths that lead to device work, plus one root for unlaunched device work.
    used = np.unique(ctx[ctx >= 0])
    needed = np.zeros(n_host, bool)
    cur = used
    while len(cur):
        needed[cur] = True
        cur = p_parent[cur]
        cur = cur[(cur >= 0) & ~needed[np.maximum(cur, 0)]]
    ctx_nodes = np.flatnonzero(needed)
    remap = np.full(n_host, -1, np.int64)
    remap[ctx_nodes] = np.arange(len(ctx_nodes))
    unl_root = len(ctx_nodes)
    d_parent = [np.where(p_parent[ctx_nodes] >= 0, remap[np.maximum(p_parent[ctx_nodes], 0)], -1), [-1]]
    d_label = [p_label[ctx_nodes], [-(trace.strings.intern("(not launched by host)")) - 1]]
    leaf_parent = np.where(ctx >= 0, remap[np.maximum(ctx, 0)], unl_root)
    key = leaf_parent * n_str + trace.op[dev]
    uniq, inv = np.unique(key, return_inverse=True)
    base = unl_root + 1
    d_parent.append(uniq // n_str)
    d_label.append(-(uniq % n_str) - 1)
    d_parent_a = np.concatenate([np.asarray(x, np.int64) for x in d_parent])
    d_label_a = np.concatenate([np.asarray(x, np.int64) for x in d_label])
    n_dev = len(d_parent_a)
    tot = np.bincount(base + inv, weights=trace.dur[dev], minlength=n_dev)
    cnt = np.bincount(base + inv, minlength=n_dev)
    slf = tot.copy()
    # Propagate device time up through the host context (deepest first).
    depth_of = np.zeros(n_dev, np.int64)
    for _ in range(64):
        par = d_parent_a
        nd = np.where(par >= 0, depth_of[np.maximum(par, 0)] + 1, 0)
        if (nd == depth_of).all():
            break
        depth_of = nd
    for level in range(int(depth_of.max(initial=0)), 0, -1):
        at = np.flatnonzero(depth_of == level)
        np.add.at(tot, d_parent_a[at], tot[at])
    strings = trace.strings.strings
    labels = [strings[-x - 1] if x < 0 else root_names.get(int(x), str(x)) for x in d_label_a.tolist()]
    return FlameTree(labels, d_parent_a, tot, slf, cnt)
