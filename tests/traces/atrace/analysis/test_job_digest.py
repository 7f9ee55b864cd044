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
