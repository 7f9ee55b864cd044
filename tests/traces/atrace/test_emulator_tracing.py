"""Trace capture from the emulator."""

from __future__ import annotations

import json

import pytest

from emulator.workloads.tracing import capture
from traces.atrace import (
    compare_traces,
    correlate,
    critical_path,
    operator_breakdown,
    read_trace,
    write_chakra,
    write_chrome_trace,
)
from traces.atrace.model.trace import Kind


@pytest.mark.parametrize("device", ["video", "inference", "gpu"])
def test_capture_has_host_runtime_device_and_dependencies(device):
    seen = []
    trace = capture(device, 0.01, progress=seen.append)
    assert seen and seen[-1] == 1.0 and seen == sorted(seen)
    kinds = trace.summary()["kinds"]
    assert kinds["host_op"] and kinds["runtime"] and kinds["kernel"] and kinds["memcpy"]
    assert len(trace.edge_src) > 0
    assert trace.span()[1] - trace.span()[0] >= 0.01e9 * 0.9
    corr = correlate(trace)
    assert corr.to_dict()["unmatched_device_events"] <= 1  # a stalled-core marker at most
    cp = critical_path(trace)
    assert {"launch", "data"} & set(cp.via)
    json.dumps(cp.to_dict())
    json.dumps(operator_breakdown(trace).to_dict())


def test_capture_is_reproducible():
    a = capture("gpu", 0.005, seed=7)
    b = capture("gpu", 0.005, seed=7)
    assert a.ts.tolist() == b.ts.tolist() and a.names() == b.names()
    assert capture("gpu", 0.005, seed=8).dur.tolist() != a.dur.tolist()


def test_older_software_version_shows_in_breakdown_and_path():
    new = capture("gpu", 0.02, sw_version="2.0")
    old = capture("gpu", 0.02, sw_version="1.0")
    diff = compare_traces(new, old, labels=("2.0", "1.0")).to_dict()
    assert diff["normalized_by"] in ("step", "trace")
    softmax = next(r for r in diff["rows"] if r["op"] == "softmax" and r["side"] == "device")
    assert softmax["mean_b_us"] > 1.5 * softmax["mean_a_us"]
    assert diff["critical_path"]["length_b_us"] > diff["critical_path"]["length_a_us"]
    json.dumps(diff)


def test_pcie_fault_moves_time_to_transfers():
    ok = operator_breakdown(capture("inference", 0.02)).rows("device")
    bad = operator_breakdown(capture("inference", 0.02, faults=["pcie_degraded"])).rows("device")

    def mean(rows, op):
        return next(r["mean_us"] for r in rows if r["op"] == op)

    assert mean(bad, "memcpy") > 3 * mean(ok, "memcpy")


def test_hang_ends_in_a_sync_that_never_returns():
    trace = capture("video", 0.05, faults=["hang"])
    assert "hung_at_us" in trace.meta
    last = int(trace.end.argmax())
    assert trace.kind[last] in (Kind.RUNTIME, Kind.ANNOTATION)


def test_unknown_fault():
    with pytest.raises(ValueError, match="unknown faults"):
        capture("gpu", 0.01, faults=["gremlins"])


def test_written_capture_reads_back(tmp_path):
    trace = capture("inference", 0.005)
    cp = critical_path(trace)
    path = tmp_path / "capture.json.gz"
    write_chrome_trace(trace, path, critical_path=cp)
    again = read_trace(path)
    assert len(again) == len(trace)
    assert len(again.edge_src) == len(trace.edge_src)
    assert critical_path(again).length_ns == cp.length_ns
    assert again.meta["device_type"] == "inference"
    text = path.read_bytes()
    assert b"ac2g" in __import__("gzip").decompress(text)
    chakra = tmp_path / "capture.chakra.json"
    write_chakra(trace, chakra)
    assert critical_path(read_trace(chakra)).length_ns == cp.length_ns
