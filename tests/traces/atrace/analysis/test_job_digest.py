"""One rank of a job, digested: its time split as its kernels say, and the slim trace it
keeps (device work, steps and collective arguments only), through bytes and back."""

from __future__ import annotations

import numpy as np
import pytest

from tests.support.traces import real_trace
from traces.atrace.analysis.job_digest import digest_bytes, rank_digest, read_digest, slim_trace
from traces.atrace.io.jobs import read_job
from traces.atrace.model.trace import Kind

SHARED = (
    "multirank_sampled_rank0.json.gz",
    "multirank_sampled_rank1.json.gz",
    "ddp_nccl_rank0.json.gz",
)


@pytest.fixture
def shared() -> list:
    """Two ranks of a sampled multi-rank job and a DDP rank (skipped without the real traces)."""
    return [real_trace(name) for name in SHARED]


def test_the_ddp_rank_splits_its_time_as_its_kernels_say(shared):
    (ddp,) = read_job([shared[2]])
    figures = rank_digest(ddp).figures
    # README: NCCL kernels are about 28 % of the summed device-operator time.
    assert figures["communication"]["communication"] == pytest.approx(0.28, abs=0.01)
    t0, t1 = ddp.span()
    split = figures["time_us"]
    assert sum(split.values()) == pytest.approx((t1 - t0) / 1000, rel=1e-6)
    assert 0 < split["communication"] < split["busy"] + split["communication"]


def test_a_slim_trace_keeps_device_work_steps_and_collective_args_only(shared):
    (trace,) = read_job([shared[2]])
    slim = slim_trace(trace)
    device = trace.on_device & np.isin(
        trace.kind, [Kind.KERNEL, Kind.MEMCPY, Kind.MEMSET, Kind.COMM]
    )
    assert (
        len(slim)
        == int(device.sum()) + sum(n.startswith("ProfilerStep#") for n in slim.names())
        < len(trace)
    )
    comm = np.flatnonzero(slim.kind == Kind.COMM)
    assert slim.args.get(int(comm[0]))["Collective name"] == "allreduce"
    assert all(slim.args.get(int(e)) == {} for e in np.flatnonzero(slim.kind == Kind.KERNEL)[:50])


def test_a_digest_comes_back_from_its_bytes_with_the_same_figures(shared):
    (trace,) = read_job([shared[0]])
    digest = rank_digest(trace)
    back = read_digest(digest_bytes(digest))
    assert back.figures == digest.figures
    assert back.rank == digest.rank and back.slim.names() == digest.slim.names()


def test_a_cpu_ranks_host_collectives_are_its_communication(tmp_path):
    """A CPU job on gloo: gloo's annotations of its collectives become the rank's
    communication; a GPU rank's own host annotations stay where they are."""
    import json

    from traces.atrace import read_trace
    from traces.atrace.analysis.job_digest import host_communication
    from traces.atrace.model.trace import Kind

    def x(name, cat, ts, dur, tid, **args):
        return {"ph": "X", "name": name, "cat": cat, "ts": ts, "dur": dur, "pid": 1, "tid": tid, "args": args}

    cpu = [x("aten::mm", "cpu_op", 0, 50, 1), x("c10d::allreduce_", "cpu_op", 60, 5, 1),
           x("gloo:all_reduce", "user_annotation", 61, 300, 2), x("gloo:broadcast", "user_annotation", 400, 20, 3)]
    (tmp_path / "cpu.json").write_text(json.dumps({"traceEvents": cpu}))
    trace = read_trace(tmp_path / "cpu.json")
    assert host_communication(trace) == 2
    comm = np.flatnonzero(trace.on_device & (trace.kind == Kind.COMM))
    assert trace.names(comm) == ["gloo:all_reduce", "gloo:broadcast"]
    assert trace.tracks[int(trace.track[comm[0]])].thread_name == "collectives on the host (gloo)"
    gpu = [*cpu, x("sgemm_kernel", "kernel", 10, 20, 9, stream=9)]
    gpu[-1]["pid"] = 0
    (tmp_path / "gpu.json").write_text(json.dumps({"traceEvents": gpu}))
    assert host_communication(read_trace(tmp_path / "gpu.json")) == 0
