"""The longest paths through a DAG (paths/longest_path.py) against a node-by-node pass on
random weighted graphs."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.examples import examples
from traces.atrace.analysis.paths import longest_path
from traces.atrace.analysis.paths.longest_path import longest_paths


def _longest_reference(order, src, dst, weight, n):
    """Longest path into and out of every node, one node at a time; the first best edge in."""
    dist, pred_edge, tail = [0] * n, [-1] * n, [0] * n
    for v in order:
        for j in range(len(src)):
            if dst[j] == v and (dist[src[j]] + weight[j] > dist[v] or pred_edge[v] < 0):
                dist[v], pred_edge[v] = dist[src[j]] + weight[j], j
    for u in reversed(order):
        tail[u] = max([tail[dst[j]] + weight[j] for j in range(len(src)) if src[j] == u], default=0)
    return dist, pred_edge, tail


@st.composite
def weighted_dags(draw):
    n = draw(st.integers(1, 25))
    order = draw(st.permutations(range(n)))
    edges = draw(
        st.lists(
            st.tuples(st.integers(0, n - 1), st.integers(0, n - 1), st.integers(0, 4)), max_size=60
        )
    )
    rank = {v: k for k, v in enumerate(order)}
    edges = [(a, z, w) for a, z, w in edges if rank[a] < rank[z]]
    return list(order), edges, n


@settings(max_examples=examples(200), deadline=None)
@given(weighted_dags(), st.sampled_from([1, 2, 3, 1 << 17]))
def test_longest_paths_match_a_node_by_node_pass(dag, block):
    """Whatever the block of meeting anchors visited at once (one anchor, a few, all)."""
    order, edges, n = dag
    default, longest_path._MEET_BLOCK = longest_path._MEET_BLOCK, block
    try:
        src = np.array([e[0] for e in edges], np.int64)
        dst = np.array([e[1] for e in edges], np.int64)
        weight = np.array([e[2] for e in edges], np.int64)
        dist, pred, pred_edge, tail = longest_paths(np.array(order, np.int64), src, dst, weight, n)
        want_dist, want_edge, want_tail = _longest_reference(
            order, src.tolist(), dst.tolist(), weight.tolist(), n
        )
        assert dist.tolist() == want_dist
        assert pred_edge.tolist() == want_edge
        assert pred.tolist() == [src[j] if j >= 0 else -1 for j in want_edge]
        assert tail.tolist() == want_tail
    finally:
        longest_path._MEET_BLOCK = default
