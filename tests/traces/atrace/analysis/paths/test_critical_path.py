"""What the critical path means: work, not frames; launch queueing; bounds; steps."""

from __future__ import annotations

import numpy as np

from tests.support.traces import real_trace
from traces.atrace import critical_path, read_trace
from traces.atrace.model.trace import Kind


def _doc(events):
    import json

    return json.dumps({"schemaVersion": 1, "traceEvents": events}).encode()


def _x(name, cat, ts, dur, tid, pid=1, **args):
    return {"ph": "X", "name": name, "cat": cat, "ts": ts, "dur": dur, "pid": pid, "tid": tid, "args": args}


def test_h100_bert_path_runs_through_the_model_thread_not_a_sleeping_monitor():
    # Before: the whole path (4,871 us, device 0 us) was a tqdm monitor thread sleeping in
    # threading.py(359): wait, a Python frame.
    trace = read_trace(real_trace("h100_bert_infer.json.gz"))
    cp = critical_path(trace)
    names = trace.names(cp.events)
    assert not any("threading.py" in n for n in names)
    assert not (trace.kind[cp.events] == Kind.PYTHON).any()
    assert cp.to_dict()["by_side"]["device_us"] > 0
    launch_threads = {int(trace.track[e]) for e, via in zip(cp.events.tolist(), cp.via) if via == "launch"}
    host_threads = set(trace.track[cp.events[~trace.on_device[cp.events]]].tolist())
    assert host_threads, "the path has host work"
    # The host part of the path is on the thread that launched the kernels.
    launching = {int(t) for t in trace.track[(trace.flags & 2) != 0]}
    assert host_threads <= launching | launch_threads


def test_gpu_bound_trace_is_device_bound():
    # MI300 Qwen inference: launches are queued milliseconds ahead of the GPU.
    trace = read_trace(real_trace("mi300_qwen_infer.json.gz"))
    d = critical_path(trace).to_dict(max_steps=0)
    assert d["bound"] == "device"
    assert d["bound_shares"]["device"] > 0.8


def test_launch_queueing_and_sync_wait_are_bounds():
    # A launch whose kernel starts 50 us later on an idle stream, then a sync that waits.
    events = [
        _x("aten::op", "cpu_op", 0, 20, 1),
        _x("cudaLaunchKernel", "cuda_runtime", 5, 5, 1, correlation=1),
        _x("kernel_a", "kernel", 60, 100, 7, pid=0, correlation=1, stream=7, device=0),
        _x("cudaDeviceSynchronize", "cuda_runtime", 25, 140, 1, correlation=2),
        _x("aten::after", "cpu_op", 170, 10, 1),
    ]
    cp = critical_path(read_trace(_doc(events)))
    b = cp.bounds_ns
    assert b["launch_queueing"] == 50_000  # 10 us (launch end) -> 60 us (kernel start)
    assert b["device"] == 100_000
    assert b["sync_wait"] == 5_000  # kernel ends at 160, the sync returns at 165
    assert b["host"] >= 15_000
    assert cp.to_dict()["bound"] == "device"
    assert [trace_name for trace_name in read_trace(_doc(events)).names(cp.events)][-1] == "aten::after"


def test_device_work_without_a_launch_is_not_charged_to_a_later_step():
    # 'old_kernel' began before the trace (no launch in it) and runs into step 1; step 1
    # launches 'new_kernel'. Step 1's path holds only its own work.
    events = [
        _x("ProfilerStep#1", "user_annotation", 100, 200, 1),
        _x("old_kernel", "kernel", 50, 120, 7, pid=0, correlation=99, stream=7, device=0),
        _x("aten::mm", "cpu_op", 110, 30, 1),
        _x("cudaLaunchKernel", "cuda_runtime", 115, 5, 1, correlation=1),
        _x("new_kernel", "kernel", 170, 40, 7, pid=0, correlation=1, stream=7, device=0),
    ]
    trace = read_trace(_doc(events))
    cp = critical_path(trace, step=1)
    names = trace.names(cp.events)
    assert "old_kernel" not in names and "new_kernel" in names
    assert "old_kernel" not in trace.names(cp.selected)
    assert np.all(trace.ts[cp.selected] >= 100)
