"""Kinds of device work: computation, communication, memory; collectives; runtime names."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest

from tests.support.traces import each_real_trace, real_trace
from tests.traces.atrace import exact
from traces.atrace import operator_breakdown, read_trace
from traces.atrace.analysis.communication import communication
from traces.atrace.model.kinds import collective, collectives, runtime_name
from traces.atrace.model.trace import ArgStore, Kind

FILES = each_real_trace(exact.chrome_trace_files())


def _raw_comm_ns(doc) -> int:
    """Exact sum of the raw NCCL / RCCL kernels' durations."""
    return sum(
        exact.ns(e["dur"]) for e in doc["traceEvents"]
        if e.get("ph") == "X" and e.get("cat") == "kernel"
        and ("nccl" in e["name"].lower() or "rccl" in e["name"].lower())
    )


@pytest.mark.parametrize("path", FILES)
def test_communication_time_equals_the_raw_nccl_kernels(path):
    trace = read_trace(path)
    expected = _raw_comm_ns(exact.load_raw(path))
    comm = (trace.kind == Kind.COMM) & trace.on_device
    assert int(trace.dur[comm].sum()) == expected
    report = communication(trace)
    assert report["split"]["communication"]["time_us"] == round(expected / 1000, 3)


def test_ddp_nccl_communication_share_and_collectives():
    path = real_trace("ddp_nccl_rank0.json.gz")
    report = communication(read_trace(path))
    # The shared README: NCCL kernels are about 28% of device-operator time (46.9 of 165.2 ms).
    assert 0.27 < report["split"]["communication"]["share"] < 0.29
    assert 46_000 < report["split"]["communication"]["time_us"] < 47_500
    by_name = {r["collective"]: r for r in report["collectives"]}
    assert by_name["allreduce"]["count"] == 15 and by_name["broadcast"]["count"] == 6
    assert by_name["allreduce"]["bytes"] > 0 and by_name["allreduce"]["algbw_gb_s"] > 0
    assert 0.0 <= report["overlap"]["share"] <= 1.0


def test_collective_facts_from_args_and_from_the_kernel_name():
    args = {"Collective name": "allreduce", "In msg nelems": 6637568, "Out msg nelems": 6637568,
            "dtype": "Float", "Process Group Name": "0", "Process Group Ranks": "[0, 1]", "Seq": 7}
    info = collective("ncclKernel_AllReduce_RING_LL_Sum_float(...)", args)
    assert info["collective"] == "allreduce" and info["bytes"] == 6637568 * 4
    assert info["group"] == "0" and info["group_ranks"] == [0, 1] and info["seq"] == 7
    bare = collective("ncclDevKernel_AllGather_RING_LL(ncclDevComm*, unsigned long, ncclWork*)", {})
    assert bare["collective"] == "allgather" and bare["bytes"] is None and bare["seq"] is None
    assert collective("void at::native::vectorized_elementwise_kernel<4>", {}) is None


@pytest.mark.parametrize("path", FILES)
def test_the_bulk_read_of_collectives_equals_one_at_a_time(path):
    trace = read_trace(path)
    events = np.flatnonzero(trace.on_device).tolist()
    names = trace.strings.strings
    assert collectives(trace, events) == [collective(names[trace.name[e]], trace.args.get(e)) for e in events]


def test_the_bulk_read_takes_any_args_a_trace_may_hold():
    name = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"
    group = {"Collective name": "allreduce", "In msg nelems": 1024, "dtype": "BFloat16",
             "Process Group Name": "0", "Process Group Ranks": "[0, 1, 2, 3]"}
    args = [
        {**group, "Seq": 0}, {**group, "Seq": 1},  # the same facts but the sequence number
        {**group, "Process Group Ranks": [0, 1], "Seq": 2},  # a list: not a key for the memo
        {"Collective name": "allgather", "In msg nelems": 2**70},  # beyond 64 bits
        {**group, "In msg nelems": 1024.0, "Seq": 3},  # equal to 1024 as a key, but no count
        {}, None,
    ]
    trace = read_trace(io.BytesIO(json.dumps({"traceEvents": [
        {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": k, "dur": 1, **({"args": a} if a else {})}
        for k, a in enumerate(args)]}).encode()))
    events = np.flatnonzero(trace.on_device).tolist()
    expected = [collective(name, a) for a in args]
    found = collectives(trace, events)
    assert found == expected
    assert [f["seq"] for f in expected[:3]] == [0, 1, 2] and expected[2]["group_ranks"] == [0, 1]
    assert found[0]["bytes"] == 2048 and found[4]["bytes"] is None
    assert expected[0]["bytes"] == 2048 and expected[3]["bytes"] is None  # no size past 64 bits
    trace.args = ArgStore.from_chunks([(b"[1]", np.array([3, 0, 0, 0, 0, 0, 0]))])  # args that are not an object
    assert collectives(trace, events[:1]) == [collective(name, {})]
    assert collectives(trace, []) == []


def test_sync_annotations_and_dma_are_not_kernels():
    a100 = read_trace(real_trace("a100_alexnet_train.json.gz"))
    sync = a100.cat == a100.find_name("cuda_sync")
    assert sync.any() and (a100.kind[sync] == Kind.SYNC).all()
    bd = operator_breakdown(a100)
    assert all(r["kind"] != "sync" for r in bd.rows("device"))
    h100 = read_trace(real_trace("h100_bert_infer.json.gz"))
    top = operator_breakdown(h100).rows("device", top=1)[0]
    assert top["kind"] == "kernel" and not top["op"].startswith("ProfilerStep")
    assert any(r["op"] == "ProfilerStep" for r in operator_breakdown(h100).to_dict()["device_annotations"])


@pytest.mark.slow
def test_mtia_dma_requests_are_copies_and_all_its_device_slices_kernels_or_copies():
    mtia = read_trace(real_trace("mtia_rank0.json.gz"))
    dma = mtia.name == mtia.find_name("dma_request")
    assert dma.any() and (mtia.kind[dma] == Kind.MEMCPY).all()
    assert np.isin(mtia.kind[mtia.on_device & mtia.is_slice], [Kind.KERNEL, Kind.MEMCPY]).all()


@pytest.mark.parametrize(("rocm", "cuda"), [
    ("hipLaunchKernel", "cudaLaunchKernel"), ("hipMemcpyAsync", "cudaMemcpyAsync"),
    ("hipDeviceSynchronize", "cudaDeviceSynchronize"), ("__hipPushCallConfiguration", "__cudaPushCallConfiguration"),
    ("cudaLaunchKernel", "cudaLaunchKernel"), ("aten::mm", "aten::mm"),
])
def test_rocm_runtime_names_compare_as_cuda_names(rocm, cuda):
    assert runtime_name(rocm) == cuda
