"""Checks that must hold on every shared real trace (../shared/data/real-traces/).

Each test runs on every Chrome / Kineto JSON file in that folder, so a trace added there is
covered by the same code. The expected values come from ``exact.py``: the raw JSON read
with decimal numbers and nested with a plain stack, sharing no code with the engine.
"""

from __future__ import annotations

from collections import Counter
from decimal import Decimal

import numpy as np
import orjson
import pytest

from tests.support.traces import each_real_trace, real_traces
from tests.traces.atrace import exact
from traces.atrace import (
    EmptyTraceError,
    chrome_trace_bytes,
    correlate,
    critical_path,
    operator_breakdown,
    read_trace,
    step_window,
    steps,
)
from traces.atrace.analysis.paths.critical_path import BOUNDS, PATH_KINDS
from traces.atrace.analysis.paths.graph import EDGE_TYPES
from traces.atrace.model.nesting import self_times
from traces.atrace.model.trace import FLAG_SYNC, Kind

FILES = each_real_trace(exact.chrome_trace_files())


def test_the_shared_traces_are_there():
    assert len(exact.chrome_trace_files()) >= 10, f"expected the shared real traces in {real_traces()}"


@pytest.fixture(scope="module", params=FILES)
def pair(request):
    """(engine trace, reference slices) of one real trace file."""
    path = request.param
    return read_trace(path), exact.slices(exact.load_raw(path))


def _engine_slices(trace):
    """Per complete event: (thread, ts, dur, name) -> (parent's key, self ns) counts."""
    parent, _ = trace.nesting()
    own = self_times(trace, parent, trace.is_slice)
    s = trace.strings.strings
    tracks = trace.tracks

    def key(i):
        t = tracks[trace.track[i]]
        return (str(t.pid), str(t.tid), int(trace.ts[i]), int(trace.dur[i]), s[trace.name[i]])

    return Counter(
        (key(i), key(int(parent[i])) if parent[i] >= 0 else None, int(own[i]))
        for i in np.flatnonzero(trace.ph == ord("X")).tolist()
    )


def _reference_slices(ref):
    def key(r):
        return (str(r.pid), str(r.tid), r.ts, r.dur, r.name)

    return Counter((key(r), key(ref[r.parent]) if r.parent >= 0 else None, r.self_ns) for r in ref)


def test_unlaunched_device_work_is_counted_exactly(pair):
    """Device-side sync events linked to their host call are not device work: on the A100
    trace they made the count of unlaunched device work -36."""
    trace, ref = pair
    assert correlate(trace).to_dict()["unmatched_device_events"] == exact.unlaunched_device_work(ref)


def test_times_nesting_and_self_time_are_exact(pair):
    trace, ref = pair
    engine, expected = _engine_slices(trace), _reference_slices(ref)
    wrong = (engine - expected) + (expected - engine)
    assert not wrong, f"{sum(wrong.values())} events differ, e.g. {next(iter(wrong))}"


def test_per_kernel_and_per_operator_totals_are_exact(pair):
    trace, ref = pair
    bd = operator_breakdown(trace, by="name")
    got: Counter = Counter()
    s = trace.strings.strings
    for k, e in enumerate(bd.events.tolist()):
        got[(s[trace.cat[e]], s[trace.name[e]])] += 0  # keeps the key
        got[("total", s[trace.cat[e]], s[trace.name[e]])] += int(trace.dur[e])
        got[("self", s[trace.cat[e]], s[trace.name[e]])] += int(bd.self_ns[k])
    expected: Counter = Counter()
    for r in ref:
        expected[("total", r.cat, r.name)] += r.dur
        expected[("self", r.cat, r.name)] += r.self_ns
    for key, value in expected.items():
        assert got[key] == value, f"{key}: engine {got[key]} ns, exact {value} ns"
    # The breakdown's own group sums agree with the per-event sums.
    assert int(bd.total_ns.sum()) == sum(r.dur for r in ref) + _non_x_total(trace)


def _non_x_total(trace):
    slices = trace.is_slice & (trace.ph != ord("X"))
    return int(trace.dur[slices].sum())


def test_export_keeps_every_time_exact(pair):
    trace, _ = pair
    again = read_trace(chrome_trace_bytes(trace))
    slices = trace.is_slice
    before = Counter(zip(trace.ts[slices].tolist(), trace.dur[slices].tolist()))
    after = Counter(zip(again.ts[again.is_slice].tolist(), again.dur[again.is_slice].tolist()))
    assert before == after


def _encloses(parent, a, b):
    q = int(parent[b])
    while q >= 0:
        if q == a:
            return True
        q = int(parent[q])
    return False


def assert_valid_path(trace, cp):
    """Every hop of the path follows an edge of the dependency graph, forward in time."""
    parent, _ = trace.nesting()
    edges = set(zip(trace.edge_src.tolist(), trace.edge_dst.tolist()))
    assert np.isin(trace.kind[cp.events], [int(k) for k in PATH_KINDS]).all(), "only operators, calls, device work"
    for a, b, via in cp.edges:
        assert via in EDGE_TYPES
        if via in ("sequence", "nested"):
            assert trace.track[a] == trace.track[b], (a, b, via)
            if via == "nested":
                assert _encloses(parent, a, b) or _encloses(parent, b, a), (a, b)
            else:
                assert trace.ts[b] >= trace.ts[a]
        elif via == "launch":
            graph = "graphlaunch" in trace.strings[trace.name[a]].lower()
            assert trace.corr[a] == trace.corr[b] >= 0 or graph
            assert not trace.on_device[a] and trace.on_device[b]
            assert trace.ts[a] <= trace.ts[b]
        elif via == "sync":
            assert trace.on_device[a] and trace.flags[b] & FLAG_SYNC
            assert trace.end[a] <= trace.end[b]
        elif via == "queue":
            assert trace.on_device[a] and trace.on_device[b] and trace.end[a] <= trace.ts[b]
        else:
            assert (a, b) in edges
        assert trace.ts[a] <= trace.end[b], "time never runs backwards along the path"


def test_critical_path_is_valid_edge_by_edge_and_holds_no_python_frame(pair):
    trace, _ = pair
    cp = critical_path(trace)
    assert_valid_path(trace, cp)
    assert not (trace.kind[cp.events] == Kind.PYTHON).any()
    # The path's length is its work plus launch queueing (on the launching call's account).
    assert int(cp.on_path_ns.sum()) == cp.length_ns
    first, last = int(cp.events[0]), int(cp.events[-1])
    elapsed = sum(cp.bounds_ns.values())
    assert set(cp.bounds_ns) == set(BOUNDS) and min(cp.bounds_ns.values()) >= 0
    assert trace.ts[first] <= trace.end[last] and elapsed <= trace.span()[1] - trace.span()[0]
    for name in steps(trace)[:2]:
        lo, hi = step_window(trace, name)
        try:
            one = critical_path(trace, step=name)
        except EmptyTraceError:
            inside = (trace.ts >= lo) & (trace.ts < hi) & trace.kind_mask(*PATH_KINDS)
            assert not inside.any(), f"{name} holds work but got no path"
            continue
        assert_valid_path(trace, one)
        host = one.events[~trace.on_device[one.events]]
        assert ((trace.ts[host] >= lo) & (trace.ts[host] < hi)).all(), "host work of the step only"


def _partial_overlaps(trace):
    """Pairs of slices on one track that overlap without one containing the other."""
    count = 0
    for t in np.unique(trace.track).tolist():
        idx = np.flatnonzero((trace.track == t) & trace.is_slice)
        idx = idx[np.lexsort((-trace.dur[idx], trace.ts[idx]))]
        open_ends: list[int] = []
        for i in idx.tolist():
            s, e = int(trace.ts[i]), int(trace.end[i])
            open_ends = [x for x in open_ends if x > s]
            count += sum(1 for x in open_ends if x < e)
            open_ends.append(e)
    return count


@pytest.fixture(scope="module")
def exported(pair):
    """(trace, its critical path, the Chrome JSON export with the path, the export's events)."""
    trace, _ = pair
    cp = critical_path(trace)
    data = chrome_trace_bytes(trace, critical_path=cp)
    return trace, cp, data, orjson.loads(data)["traceEvents"]


def test_exported_flows_run_forward_and_each_id_starts_once(exported):
    *_, events = exported
    flows: dict = {}
    for e in events:
        if e.get("ph") in ("s", "t", "f"):
            flows.setdefault(e["id"], []).append(e)
    for fid, points in flows.items():
        assert [p["ph"] for p in points].count("s") == 1, f"flow id {fid} starts {len(points)} times"
        times = [Decimal(str(p["ts"])) for p in points]
        assert times == sorted(times), f"flow {fid} runs backwards in time"


def test_export_reimports_to_the_same_breakdown_and_critical_path(exported):
    trace, cp, data, _ = exported
    again = read_trace(data)
    assert operator_breakdown(again).to_dict() == operator_breakdown(trace).to_dict()
    cp2 = critical_path(again)
    assert cp2.length_ns == cp.length_ns and cp2.bounds_ns == cp.bounds_ns
    assert again.names(cp2.events) == trace.names(cp.events)
    assert len(again.edge_src) == len(trace.edge_src)
    assert _partial_overlaps(again) == _partial_overlaps(trace), "the export made slices overlap"


def test_export_invents_no_stream_for_annotations_and_waits(exported):
    trace, _, _, exported_events = exported
    events = [e for e in exported_events if e.get("ph") == "X"]
    source_has_stream = Counter(
        (trace.strings[trace.name[i]], int(trace.ts[i])) for i in range(len(trace))
        if b'"stream"' in trace.args.raw(i)
    )
    for e in events:
        if e.get("cat") in ("gpu_user_annotation", "cuda_sync") and "stream" in e.get("args", {}):
            key = (e["name"], exact.ns(Decimal(str(e["ts"]))))
            assert source_has_stream[key], f"stream added to {e['name']!r}"
