"""Nesting of slices on a track (model/nesting.py) against a stack machine, on random
properly nested intervals and on intervals that outlive the slice they began in."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.examples import examples
from traces.atrace import Kind, TraceBuilder, critical_path


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


@st.composite
def overlapping_intervals(draw):
    """Intervals on a few threads, nested or not: some outlive the slice they began in."""
    n = draw(st.integers(1, 30))
    return [
        (draw(st.integers(0, 40)), draw(st.integers(1, 25)), draw(st.integers(0, 2)))
        for _ in range(n)
    ]


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
    order = sorted(
        range(len(intervals)), key=lambda i: (intervals[i][2], intervals[i][0], -intervals[i][1], i)
    )
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
