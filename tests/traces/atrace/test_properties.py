"""Property tests on random graphs and random nestings."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from traces.atrace import Kind, TraceBuilder, critical_path
from traces.atrace.chakra import chakra_from_dict


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


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
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


@settings(max_examples=150, deadline=None)
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
