"""Property tests on random graphs and random nestings."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.examples import examples
from traces.atrace import critical_path
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
            {
                "id": i,
                "name": f"n{i}",
                "type": "COMP_NODE",
                "data_deps": deps[i],
                "duration_micros": durations[i],
            }
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


def test_unique_longest_path_helper():
    assert _count_longest([1, 1], [[], [0]]) == 1
    assert _count_longest([1, 1, 1], [[], [], []]) == 3
