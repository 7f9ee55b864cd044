"""Real PyTorch profiler traces (torch on the CPU): breakdown totals, critical path validity."""

from __future__ import annotations

import json
from collections import defaultdict

import numpy as np
import pytest

from traces.atrace import (
    chrome_trace_bytes,
    correlate,
    critical_path,
    flame,
    operator_breakdown,
    read_trace,
    steps,
    timeline,
)
from traces.atrace.analysis.paths.graph import EDGE_TYPES
from traces.atrace.model.trace import FLAG_SYNC, WORK_KINDS

# Recording them imports torch and profiles three models (~15 s of CPU, once per run): the
# slow tier (make test), not the edit loop (make test-fast).
pytestmark = pytest.mark.slow

MODELS = ["mlp", "cnn", "transformer"]


def _raw_events(path):
    return [e for e in json.loads(path.read_text())["traceEvents"] if e.get("ph") == "X"]


def _busy_by_thread(events):
    """Union of [ts, ts+dur] per (pid, tid) for work events, in ns, from the raw JSON."""
    by = defaultdict(list)
    for e in events:
        if e.get("cat") in ("cpu_op", "cuda_runtime", "kernel", "gpu_memcpy"):
            by[(e["pid"], e["tid"])].append((round(e["ts"] * 1000), round((e["ts"] + e["dur"]) * 1000)))
    busy = {}
    for key, spans in by.items():
        spans.sort()
        total, cur_s, cur_e = 0, None, None
        for s, e in spans:
            if cur_e is None or s > cur_e:
                if cur_e is not None:
                    total += cur_e - cur_s
                cur_s, cur_e = s, e
            else:
                cur_e = max(cur_e, e)
        total += cur_e - cur_s
        busy[key] = total
    return busy


@pytest.mark.parametrize("model", MODELS)
def test_breakdown_totals_match_raw_events(torch_traces, model):
    path = torch_traces[model]
    raw = _raw_events(path)
    trace = read_trace(path)
    bd = operator_breakdown(trace)
    expected_count = defaultdict(int)
    expected_total = defaultdict(float)
    for e in raw:
        expected_count[e["name"]] += 1
        expected_total[e["name"]] += e["dur"]
    by_name = operator_breakdown(trace, by="name")
    got_count = defaultdict(int)
    got_total = defaultdict(float)
    for row in by_name.rows():
        got_count[row["op"]] += row["count"]
        got_total[row["op"]] += row["total_us"]
    assert dict(got_count) == dict(expected_count)
    for name, total in expected_total.items():
        assert got_total[name] == pytest.approx(total, abs=0.01 * max(1, expected_count[name]))
    # Self time never exceeds total time, and nesting accounts for all of a parent's time.
    for row in bd.rows():
        assert 0 <= row["self_us"] <= row["total_us"] + 1e-6
        assert row["p50_us"] <= row["p95_us"] + 1e-6 <= row["max_us"] + 2e-6
    assert sum(r["count"] for r in bd.rows("host")) == len(raw)
    assert sum(r["total_us"] for r in bd.rows()) == pytest.approx(sum(e["dur"] for e in raw), rel=1e-6)


@pytest.mark.parametrize("model", MODELS)
def test_critical_path_valid_and_no_shorter_than_a_thread(torch_traces, model):
    path = torch_traces[model]
    trace = read_trace(path)
    cp = critical_path(trace)
    busy = _busy_by_thread(_raw_events(path))
    assert busy, "the trace has cpu ops"
    assert cp.length_ns >= max(busy.values()) - 1000  # us rounding of the raw file
    assert cp.length_ns <= trace.span()[1] - trace.span()[0]
    _assert_valid_path(trace, cp)
    # The path's length is its work plus launch queueing (on the launching call's account).
    assert int(cp.on_path_ns.sum()) == cp.length_ns
    d = cp.to_dict()
    json.dumps(d)
    assert d["slack"]["operators"] == len(cp.selected)
    # One step's path is inside that step.
    names = steps(trace)
    assert names[:3] == ["ProfilerStep#0", "ProfilerStep#1", "ProfilerStep#2"]
    one = critical_path(trace, step=1)
    assert 0 < one.length_ns <= cp.length_ns
    _assert_valid_path(trace, one)


def _assert_valid_path(trace, cp):
    """Every step follows an edge that exists in the trace's dependency graph."""
    parent, _ = trace.nesting()
    edges = set(zip(trace.edge_src.tolist(), trace.edge_dst.tolist()))
    ev = cp.events.tolist()
    assert len(set(ev)) >= 1
    work = trace.kind_mask(*WORK_KINDS)
    assert work[cp.events].all()
    for a, b, via in cp.edges:
        assert via in EDGE_TYPES
        if via in ("sequence", "nested"):
            assert trace.track[a] == trace.track[b], (a, b, via)
            if via == "nested":
                assert parent[a] == b or parent[b] == a, (a, b)
            else:
                assert trace.ts[b] >= trace.ts[a]
        elif via == "launch":
            assert trace.corr[a] == trace.corr[b] >= 0
            assert not trace.on_device[a] and trace.on_device[b]
        elif via == "sync":
            assert trace.on_device[a] and trace.flags[b] & FLAG_SYNC
            assert trace.end[a] <= trace.end[b]
        elif via == "queue":
            assert trace.on_device[a] and trace.on_device[b] and trace.end[a] <= trace.ts[b]
        else:
            assert (a, b) in edges
        # Time never runs backwards along the path.
        assert trace.ts[a] <= trace.end[b]


def test_gpu_trace_correlation_and_sync(gpu_trace):
    trace = read_trace(gpu_trace)
    assert trace.meta["distributedInfo"]["rank"] == 0
    corr = correlate(trace)
    d = corr.to_dict()
    json.dumps(d)
    kernels = int((trace.on_device & trace.is_slice).sum())
    assert d["matched"] == kernels and d["unmatched_device_events"] == 0
    assert d["launch_latency"]["p50_us"] > 0
    assert np.all(corr.latency_ns >= 0)
    ops = {r["host_op"] for r in d["launched_by"]}
    assert "aten::addmm" in ops and "aten::mm" in ops
    assert {b["label"].split("/")[-1].strip() for b in d["bubbles"]} >= {"stream 7", "stream 20"}
    assert sum(v["share"] for v in d["states"].values()) == pytest.approx(1.0, abs=1e-3)
    cp = critical_path(trace)
    _assert_valid_path(trace, cp)
    vias = set(cp.via)
    assert "launch" in vias and "sync" in vias
    assert cp.to_dict()["by_side"]["device_us"] > 0
    one = critical_path(trace, step=2)
    _assert_valid_path(trace, one)
    assert one.length_ns < cp.length_ns
    full = operator_breakdown(trace)
    assert operator_breakdown(trace, side="device").rows() == full.rows("device")
    assert operator_breakdown(trace, side="host").rows() == full.rows("host")


def test_flame_and_timeline(torch_traces, gpu_trace):
    trace = read_trace(torch_traces["mlp"])
    f = flame(trace).to_dict()
    host = f["host"]
    assert len(host["ids"]) == len(host["labels"]) == len(host["parents"]) == len(host["values_us"])
    idx = {i: k for k, i in enumerate(host["ids"])}
    for k, p in enumerate(host["parents"]):
        if p:
            assert host["values_us"][idx[p]] + 1e-3 >= host["values_us"][k] * 0.999
    assert "aten::addmm" in host["labels"]
    g = flame(read_trace(gpu_trace)).to_dict()
    assert "ampere_sgemm_128x64_tn" in g["device"]["labels"]
    tl = timeline(trace, width_px=100, max_bars=50).to_dict()
    json.dumps(tl)
    assert len(tl["bars"]["row"]) <= 50 and tl["merged_bars"] > 0
    assert 0 < tl["events_in_window"] <= int(trace.is_slice.sum())
    t0, t1 = trace.span()
    zoom = timeline(trace, start_ns=t0, end_ns=t0 + (t1 - t0) // 10).to_dict()
    assert all(zoom["start_us"] <= s <= e <= zoom["end_us"]
               for s, e in zip(zoom["bars"]["start_us"], zoom["bars"]["end_us"]))


def test_drill_down_and_group_by_arg(torch_traces):
    trace = read_trace(torch_traces["mlp"])
    bd = operator_breakdown(trace)
    inst = bd.instances("aten::addmm")
    assert inst and inst[0]["dur_us"] >= inst[-1]["dur_us"]
    groups = bd.group_by_arg("aten::addmm", "Input Dims")
    assert sum(g["count"] for g in groups) == len(inst)
    assert all(isinstance(g["value"], list) for g in groups)


@pytest.mark.parametrize("model", MODELS)
def test_round_trip_through_chrome_writer(torch_traces, model):
    trace = read_trace(torch_traces[model])
    cp = critical_path(trace)
    again = read_trace(chrome_trace_bytes(trace, critical_path=cp))
    assert len(again) == len(trace)
    a, b = operator_breakdown(trace).to_dict(), operator_breakdown(again).to_dict()
    assert a["host"] == b["host"]
    assert critical_path(again).length_ns == cp.length_ns
