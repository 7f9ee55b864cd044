"""Chrome export fidelity on small hand-made traces (the real traces are in test_real_traces)."""

from __future__ import annotations

import json

import orjson

from traces.atrace import chrome_trace_bytes, critical_path, read_trace


def _x(name, cat, ts, dur, pid=1, tid=1, **args):
    return {"ph": "X", "name": name, "cat": cat, "ts": ts, "dur": dur, "pid": pid, "tid": tid, "args": args}


def test_a_flow_written_finish_first_still_runs_forward():
    # Kineto writes some 'f' before their 's'; the edge must go from forward to backward op.
    events = [
        _x("aten::mm", "cpu_op", 10, 5), _x("MmBackward0", "cpu_op", 100, 8),
        {"ph": "f", "id": 7, "cat": "fwdbwd", "name": "fwdbwd", "pid": 1, "tid": 1, "ts": 100, "bp": "e"},
        {"ph": "s", "id": 7, "cat": "fwdbwd", "name": "fwdbwd", "pid": 1, "tid": 1, "ts": 10},
    ]
    trace = read_trace(json.dumps({"traceEvents": events}).encode())
    assert trace.names(trace.edge_src) == ["aten::mm"] and trace.names(trace.edge_dst) == ["MmBackward0"]


def test_one_launch_of_many_kernels_gets_one_flow_id_per_arrow():
    # A CUDA graph launch: one runtime call, one correlation id, three kernels.
    events = [_x("cudaGraphLaunch", "cuda_runtime", 0, 5, correlation=42)]
    events += [_x(f"k{i}", "kernel", 10 + 10 * i, 5, pid=0, tid=7, correlation=42) for i in range(3)]
    events.append(_x("ProfilerStep#0", "gpu_user_annotation", 10, 30, pid=0, tid=7))
    trace = read_trace(json.dumps({"traceEvents": events}).encode())
    doc = orjson.loads(chrome_trace_bytes(trace, critical_path=critical_path(trace)))
    starts = [e["id"] for e in doc["traceEvents"] if e.get("ph") == "s"]
    assert len(starts) == len(set(starts)) >= 3
    annotation = next(e for e in doc["traceEvents"] if e.get("name") == "ProfilerStep#0")
    assert "stream" not in annotation.get("args", {})
    kernel = next(e for e in doc["traceEvents"] if e.get("name") == "k0")
    assert kernel["args"]["stream"] == 7


def test_sync_arrows_of_the_critical_path_point_forward():
    events = [
        _x("cudaLaunchKernel", "cuda_runtime", 0, 5, correlation=1),
        _x("kernel", "kernel", 10, 100, pid=0, tid=7, correlation=1),
        _x("cudaDeviceSynchronize", "cuda_runtime", 6, 110),
    ]
    trace = read_trace(json.dumps({"traceEvents": events}).encode())
    cp = critical_path(trace)
    assert "sync" in cp.via
    doc = orjson.loads(chrome_trace_bytes(trace, critical_path=cp))
    path_flows: dict = {}
    for e in doc["traceEvents"]:
        if e.get("cat") == "critical_path":
            path_flows.setdefault(e["id"], {})[e["ph"]] = e["ts"]
    assert path_flows and all(f["s"] <= f["f"] for f in path_flows.values())
