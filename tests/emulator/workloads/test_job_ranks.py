"""One rank of a distributed job as PyTorch's profiler records it: NCCL-like all-reduce
kernels whose args name the collective and its group, held from the rank's arrival to the
collective's end, operators timed by the device as it is now, and ranks that are timed but
not traced."""

import numpy as np
import pytest

from emulator.workloads.job_ranks import ECC_STALL_S, RankRecorder
from emulator.workloads.tracing import DeviceNow
from emulator.workloads.training import training_step
from traces.atrace.model.trace import Kind

GROUP = {"name": "0", "desc": "default_pg", "size": 2, "ranks": [0, 1]}
WAIT_NS = 2_000_000  # how long after a rank's arrival its peers complete each collective
HEALTHY = DeviceNow()


def _recorder(traced=True, seed=1) -> RankRecorder:
    return RankRecorder(
        0, "gpu", "2.0", training_step("gpu", "data", 2), GROUP, seed, traced=traced
    )


def _one_step(rec: RankRecorder, now: DeviceNow = HEALTHY) -> tuple[int, list[int]]:
    """Runs a step, each collective completing WAIT_NS after this rank reaches it."""
    rec.begin_step(rec.t, now)
    arrivals = []
    for segment in rec.training.segments():
        arrival = rec.run_segment(segment)
        if arrival is not None:
            arrivals.append(arrival)
            rec.settle(segment[-1], arrival, arrival + WAIT_NS)
    return rec.end_step(), arrivals


def _collectives(trace):
    return np.flatnonzero(trace.kind == Kind.COMM)


def test_each_all_reduce_looks_like_nccls_and_holds_the_ranks_wait():
    rec = _recorder()
    _, arrivals = _one_step(rec)
    _one_step(rec)
    trace = rec.builder.build()
    comms = _collectives(trace)
    per_step = len(rec.training.collectives())
    assert len(comms) == 2 * per_step and len(arrivals) == per_step
    args = [trace.args.get(int(i)) for i in comms]
    assert sorted(a["Seq"] for a in args) == list(range(2 * per_step))
    assert {
        (a["Collective name"], a["dtype"], a["Group size"], a["Process Group Name"]) for a in args
    } == {("allreduce", "Float", 2, "0")}
    assert set(trace.names(comms)) == {
        "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"
    }
    first = sorted(comms, key=lambda i: trace.ts[i])[:per_step]
    assert sorted(int(trace.ts[i]) for i in first) == sorted(arrivals)
    assert all(trace.dur[i] >= WAIT_NS for i in first)
    launches = {int(trace.corr[i]) for i in np.flatnonzero(trace.kind == Kind.RUNTIME)}
    assert {int(trace.corr[i]) for i in comms} <= launches
    assert trace.names().count("nccl:all_reduce") == 2 * per_step
    assert [n for n in trace.names() if n.startswith("ProfilerStep#")] == [
        "ProfilerStep#0",
        "ProfilerStep#1",
    ]


def test_a_throttled_clock_stretches_compute_and_a_degraded_link_stretches_copies():
    rec = _recorder()
    compute = next(n for n in rec.training.nodes if n.kind == "compute")
    copy = next(n for n in rec.training.nodes if n.kind == "dma")
    rec.now = DeviceNow(clock_share=0.5, link_share=0.25)
    assert rec._node_slowdown(compute, set()) == pytest.approx(2.0)
    assert rec._node_slowdown(copy, set()) == pytest.approx(4.0)
    rec.now = DeviceNow(ecc_per_s=150)
    assert rec._node_slowdown(compute, set()) == pytest.approx(1 + 150 * ECC_STALL_S)
    healthy, _ = _one_step(_recorder())
    slow, _ = _one_step(_recorder(), DeviceNow(clock_share=0.5))
    assert slow > 1.3 * healthy


def test_an_untraced_rank_keeps_time_as_a_traced_one_and_records_nothing():
    traced, quiet = _recorder(), _recorder(traced=False)
    assert _one_step(traced) == _one_step(quiet)
    assert traced.events > 100 and quiet.events == 0
    stopped = _recorder()
    _one_step(stopped)
    kept = stopped.events
    stopped.stop_recording()
    _one_step(stopped)
    assert stopped.events == kept and stopped.steps == 2


def test_a_step_whose_peer_stopped_waits_to_the_given_end():
    rec = _recorder()
    rec.begin_step(0, DeviceNow())
    rec.run_segment(rec.training.segments()[0])
    assert rec.end_step(until=5_000_000_000) == 5_000_000_000
    trace = rec.builder.build()
    (sync,) = np.flatnonzero(trace.name == trace.find_name("rtDeviceSynchronize"))
    assert trace.end[sync] == 5_000_000_000
    assert trace.end.max() == 5_000_000_000 and not _collectives(trace).size  # the collective never ran
