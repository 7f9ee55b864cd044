"""Property tests on random graphs and random nestings."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.examples import examples
from traces.atrace import Kind, TraceBuilder, critical_path
from traces.atrace.analysis.paths.longest_path import longest_paths
from traces.atrace.io.chakra.json_reader import chakra_from_dict


@st.composite
def dags(draw, max_nodes=9):
    n = draw(st.integers(1, max_nodes))
    durations = draw(st.lists(st.integers(0, 20), min_size=n, max_size=n))
    deps = []
    for i in range(n):
        deps.append(sorted(draw(st.sets(st.integers(0, i - 1), max_size=3)) if i else []))
    return durations, deps


def _brute_force_longest(durations, deps):
    """Longest path by enumerating every path from every node (exponential; small graphs)."""
    users = {i: [] for i in range(len(durations))}
    for i, ds in enumerate(deps):
        for d in ds:
            users[d].append(i)

    def walk(i):
        best = 0
        for u in users[i]:
            best = max(best, walk(u))
        return durations[i] + best

    return max(walk(i) for i in range(len(durations)))


def _graph_trace(durations, deps):
    doc = {
        "nodes": [
            {"id": i, "name": f"n{i}", "type": "COMP_NODE", "data_deps": deps[i],
             "duration_micros": durations[i]}
            for i in range(len(durations))
        ]
    }
    return chakra_from_dict(doc)


@settings(max_examples=examples(120), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(dags())
def test_critical_path_is_the_longest_path(dag):
    durations, deps = dag
    trace = _graph_trace(durations, deps)
    cp = critical_path(trace)
    assert cp.length_ns == _brute_force_longest(durations, deps) * 1000
    # Each step follows an explicit edge of the graph.
    edges = set(zip(trace.edge_src.tolist(), trace.edge_dst.tolist()))
    for a, b, via in cp.edges:
        assert via == "data" and (a, b) in edges
    assert int(cp.on_path_ns.sum()) == cp.length_ns
    # Slack: zero on the path; elsewhere the length minus the longest path through the node.
    on_path = set(cp.events.tolist())
    node_of = {int(trace.args.get(i)["node_id"]): i for i in range(len(trace))}
    through = _through(durations, deps)
    for node, ev in node_of.items():
        slack = cp.slack_of(ev)
        assert slack == cp.length_ns - through[node] * 1000
        if ev in on_path:
            assert slack == 0
    # Zero slack exactly on the path when the longest path is unique.
    if _count_longest(durations, deps) == 1:
        zero = {ev for node, ev in node_of.items() if cp.slack_of(ev) == 0 and durations[node] > 0}
        assert zero == {e for e in on_path if trace.dur[e] > 0}


def _through(durations, deps):
    n = len(durations)
    users = {i: [] for i in range(n)}
    for i, ds in enumerate(deps):
        for d in ds:
            users[d].append(i)
    head = [0] * n  # longest path ending at i (inclusive)
    for i in range(n):
        head[i] = durations[i] + max((head[d] for d in deps[i]), default=0)
    tail = [0] * n  # longest path starting at i (inclusive)
    for i in reversed(range(n)):
        tail[i] = durations[i] + max((tail[u] for u in users[i]), default=0)
    return [head[i] + tail[i] - durations[i] for i in range(n)]


def _count_longest(durations, deps):
    n = len(durations)
    users = {i: [] for i in range(n)}
    for i, ds in enumerate(deps):
        for d in ds:
            users[d].append(i)
    best = _brute_force_longest(durations, deps)
    count = 0

    def walk(i, total):
        nonlocal count
        total += durations[i]
        if not users[i]:
            count += total == best
        for u in users[i]:
            walk(u, total)

    for i in range(n):
        walk(i, 0)
    return count


@st.composite
def nested_intervals(draw):
    """Properly nested intervals on one thread, built from a random bracket sequence."""
    n = draw(st.integers(1, 12))
    gaps = draw(st.lists(st.integers(0, 5), min_size=2 * n, max_size=2 * n))
    events, stack, t, made = [], [], 0, 0
    for k in range(2 * n):
        t += gaps[k]
        must_close = made == n
        if stack and (must_close or draw(st.booleans())):
            start, i = stack.pop()
            events[i] = (start, t - start)
        else:
            events.append(None)
            stack.append((t, len(events) - 1))
            made += 1
    while stack:
        start, i = stack.pop()
        events[i] = (start, t - start)
    return events


@settings(max_examples=examples(150), deadline=None)
@given(nested_intervals())
def test_nesting_matches_a_stack_machine(intervals):
    b = TraceBuilder()
    tr = b.track(1, 1)
    for k, (start, dur) in enumerate(intervals):
        b.add(f"e{k}", start * 1000, dur * 1000, tr, kind=Kind.HOST_OP)
    trace = b.build()
    parent, depth = trace.nesting()
    # Reference: sort by (start, longer first, index) and run a stack.
    order = sorted(range(len(intervals)), key=lambda i: (intervals[i][0], -intervals[i][1], i))
    stack, want_parent = [], {}
    for i in order:
        start = intervals[i][0]
        while stack and sum(intervals[stack[-1]]) <= start:
            stack.pop()  # ended before this one started
        want_parent[i] = stack[-1] if stack else -1
        stack.append(i)
    for i in range(len(intervals)):
        if intervals[i][1] > 0 and want_parent[i] >= 0 and intervals[want_parent[i]][1] > 0:
            assert parent[i] == want_parent[i], (intervals, i)
        assert depth[i] >= 0
    # The critical path of one thread is its busy time.
    cp = critical_path(trace)
    tops = [intervals[i] for i in range(len(intervals)) if parent[i] < 0]
    assert cp.length_ns == sum(d for _, d in tops) * 1000


def test_unique_longest_path_helper():
    assert _count_longest([1, 1], [[], [0]]) == 1
    assert _count_longest([1, 1, 1], [[], [], []]) == 3


@st.composite
def overlapping_intervals(draw):
    """Intervals on a few threads, nested or not: some outlive the slice they began in."""
    n = draw(st.integers(1, 30))
    return [(draw(st.integers(0, 40)), draw(st.integers(1, 25)), draw(st.integers(0, 2))) for _ in range(n)]


@settings(max_examples=examples(200), deadline=None)
@given(overlapping_intervals())
def test_nesting_of_partial_overlaps_matches_a_stack_machine(intervals):
    b = TraceBuilder()
    tracks = [b.track(1, t) for t in range(3)]
    for k, (start, dur, thread) in enumerate(intervals):
        b.add(f"e{k}", start, dur, tracks[thread], kind=Kind.HOST_OP)
    parent, depth = b.build().nesting()
    # Reference: per thread, by (start, longer first, index), a stack that drops the slices
    # on top of it that ended before the next one starts.
    order = sorted(range(len(intervals)), key=lambda i: (intervals[i][2], intervals[i][0], -intervals[i][1], i))
    stack, thread = [], None
    for i in order:
        start, _, t = intervals[i]
        if t != thread:
            stack, thread = [], t
        while stack and sum(intervals[stack[-1]][:2]) <= start:
            stack.pop()
        want = stack[-1] if stack else -1
        assert parent[i] == want, (intervals, i)
        assert depth[i] == (depth[want] + 1 if want >= 0 else 0), (intervals, i)
        stack.append(i)


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
    edges = draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1), st.integers(0, 4)), max_size=60))
    rank = {v: k for k, v in enumerate(order)}
    edges = [(a, z, w) for a, z, w in edges if rank[a] < rank[z]]
    return list(order), edges, n


@settings(max_examples=examples(200), deadline=None)
@given(weighted_dags())
def test_longest_paths_match_a_node_by_node_pass(dag):
    order, edges, n = dag
    src = np.array([e[0] for e in edges], np.int64)
    dst = np.array([e[1] for e in edges], np.int64)
    weight = np.array([e[2] for e in edges], np.int64)
    dist, pred, pred_edge, tail = longest_paths(np.array(order, np.int64), src, dst, weight, n)
    want_dist, want_edge, want_tail = _longest_reference(order, src.tolist(), dst.tolist(), weight.tolist(), n)
    assert dist.tolist() == want_dist
    assert pred_edge.tolist() == want_edge
    assert pred.tolist() == [src[j] if j >= 0 else -1 for j in want_edge]
    assert tail.tolist() == want_tail
