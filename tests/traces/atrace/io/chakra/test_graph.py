"""Chakra graph semantics (JSON form): parent links, missing nodes, scheduling, exact times."""

from __future__ import annotations

import orjson
import pytest

from traces.atrace import EdgeKind, Kind, TraceFormatError, TraceGraphError, read_trace
from traces.atrace.analysis.communication import communication
from traces.atrace.io.chakra.writer import chakra_dict, micros
from traces.atrace.model.kinds import collective


def _read(nodes: list[dict]):
    trace = read_trace(orjson.dumps({"nodes": nodes}))
    at = {int(trace.args.get(e)["node_id"]): e for e in range(len(trace))}
    return trace, at


def _span(trace, at, nid):
    e = at[nid]
    return int(trace.ts[e]), int(trace.end[e])


def test_parent_link_and_reverse_data_dep_are_containment_not_a_cycle():
    # P is C's parent (C's ctrl_deps), and P consumes C's output (P's data_deps): a data
    # dependency one way and a control link the other. X needs P's result.
    trace, at = _read([
        {"id": 1, "name": "P", "duration_micros": 10, "data_deps": [2]},
        {"id": 2, "name": "C", "duration_micros": 4, "ctrl_deps": [1]},
        {"id": 3, "name": "D", "duration_micros": 3, "ctrl_deps": [1], "data_deps": [2]},
        {"id": 4, "name": "X", "duration_micros": 1, "data_deps": [1]},
    ])
    assert _span(trace, at, 1) == (0, 10_000)
    assert _span(trace, at, 2) == (0, 4_000)  # starts with its parent, not after it
    assert _span(trace, at, 3) == (4_000, 7_000)  # after its sibling's data
    assert _span(trace, at, 4) == (10_000, 11_000)
    assert trace.meta["chakra"]["containment_deps"] == 1
    kinds = {(int(a), int(z)): EdgeKind(int(k)) for a, z, k in zip(trace.edge_src, trace.edge_dst, trace.edge_kind)}
    assert kinds[(at[1], at[2])] == EdgeKind.CONTROL
    assert (at[2], at[1]) not in kinds  # the containment dependency is not an ordering edge


def test_dependencies_on_absent_nodes_are_dropped_and_reported():
    trace, at = _read([
        {"id": 10, "name": "a", "duration_micros": 2, "ctrl_deps": [3], "data_deps": [7]},
        {"id": 11, "name": "b", "duration_micros": 2, "ctrl_deps": [3], "data_deps": [10, 8]},
    ])
    assert _span(trace, at, 11) == (2_000, 4_000)
    info = trace.meta["chakra"]
    assert (info["missing_nodes"], info["dangling_deps"]) == (3, 4)
    assert trace.meta["warnings"][0].startswith("chakra: dropped 4 dependencies on 3 nodes")
    assert "3, 7, 8" in trace.meta["warnings"][0]


def test_bad_parent_links_are_dropped_not_called_cycles():
    # Converter output seen in real files: a node that is its own parent, two nodes that are
    # each other's parent, a CPU operator whose "parent" is a kernel.
    trace, at = _read([
        {"id": 1, "name": "self", "duration_micros": 1, "ctrl_deps": [1]},
        {"id": 2, "name": "op", "duration_micros": 5, "ctrl_deps": [3]},
        {"id": 3, "name": "kernel", "duration_micros": 2, "ctrl_deps": [2],
         "attr": [{"name": "is_cpu_op", "bool_val": False}]},
        {"id": 4, "name": "a", "duration_micros": 1, "ctrl_deps": [5]},
        {"id": 5, "name": "b", "duration_micros": 1, "ctrl_deps": [4]},
    ])
    info = trace.meta["chakra"]
    assert info["self_deps"] == 1 and info["dropped_parents"] == 2
    assert trace.kind[at[3]] == Kind.KERNEL and trace.on_device[at[3]]
    assert _span(trace, at, 3)[0] >= _span(trace, at, 2)[0]  # the kernel keeps its launcher as parent


def test_a_real_cycle_is_still_an_error():
    with pytest.raises(TraceGraphError, match="cycle"):
        _read([
            {"id": 1, "duration_micros": 1, "data_deps": [3]},
            {"id": 2, "duration_micros": 1, "data_deps": [1]},
            {"id": 3, "duration_micros": 1, "data_deps": [2]},
        ])


def test_exact_fractional_microseconds():
    trace, at = _read([
        {"id": 1, "name": "a", "duration_micros": 0.4, "start_time_micros": 1700000000123456},
        {"id": 2, "name": "b", "duration_micros": "2.001", "start_time_micros": "1700000000123457.5"},
    ])
    assert _span(trace, at, 1) == (1700000000123456000, 1700000000123456400)
    assert _span(trace, at, 2) == (1700000000123457500, 1700000000123459501)


def test_collective_nodes_read_as_communication():
    trace, at = _read([
        {"id": 1, "name": "ncclKernel_AllGather", "type": "COMM_COLL_NODE", "duration_micros": 3,
         "attr": [{"name": "comm_type", "int64_val": "2"}, {"name": "comm_size", "int64_val": 1 << 20}]},
        {"id": 2, "name": "c10d::allgather_", "type": "COMM_COLL_NODE", "duration_micros": 1,
         "attr": [{"name": "is_cpu_op", "bool_val": True}]},
    ])
    assert trace.kind[at[1]] == Kind.COMM
    # The communication analysis reads a Chakra collective as it reads a Kineto one.
    info = collective("ncclKernel_AllGather", trace.args.get(at[1]))
    assert (info["collective"], info["bytes"]) == ("allgather", 1 << 20)
    table = communication(trace)["collectives"]
    assert table == [{"collective": "allgather", "count": 1, "time_us": 3.0, "bytes": 1 << 20,
                      "algbw_gb_s": round((1 << 20) / 3000, 3)}]
    assert trace.kind[at[2]] == Kind.HOST_OP  # the CPU side of a collective is an operator
    nodes = {n["name"]: n for n in chakra_dict(trace)["nodes"]}
    assert nodes["ncclKernel_AllGather"]["type"] == "COMM_COLL_NODE"
    assert {"name": "comm_type", "int64_val": 2} in nodes["ncclKernel_AllGather"]["attr"]
    assert nodes["c10d::allgather_"]["type"] == "COMP_NODE"


def test_micros_rounds_to_nearest_and_never_hides_work():
    assert [micros(x) for x in (0, 1, 400, 499, 500, 1_499, 1_500, 2_000)] == [0, 1, 1, 1, 1, 1, 2, 2]


def test_point_to_point_and_unknown_communication_node_types():
    trace, _ = _read([
        {"id": 1, "name": "ncclDevKernel_SendRecv", "duration_micros": 2,
         "attr": [{"name": "is_cpu_op", "bool_val": False}]},
        {"id": 2, "name": "nccl:send", "type": "COMM_SEND_NODE", "duration_micros": 2,
         "attr": [{"name": "Collective name", "string_val": "send"}]},
        {"id": 3, "name": "ncclKernel_Broadcast_RING", "duration_micros": 2,
         "attr": [{"name": "is_cpu_op", "bool_val": False}]},
    ])
    assert (trace.kind == Kind.COMM).all()  # named NCCL work is communication
    nodes = {n["name"]: n for n in chakra_dict(trace)["nodes"]}
    assert nodes["nccl:send"]["type"] == "COMM_SEND_NODE"
    # Not a collective Chakra can name: not written as one (it would read as an all-reduce).
    assert nodes["ncclDevKernel_SendRecv"]["type"] == "COMP_NODE"
    assert {"name": "kind", "string_val": "comm"} in nodes["ncclDevKernel_SendRecv"]["attr"]
    assert nodes["ncclKernel_Broadcast_RING"]["type"] == "COMM_COLL_NODE"
    assert {"name": "comm_type", "int64_val": 5} in nodes["ncclKernel_Broadcast_RING"]["attr"]


def test_newer_host_execution_trace_is_refused_too():
    # PyTorch ET schema 1.0.3 on: the parent is an integer ctrl_deps, rf_id an attribute.
    node = {"id": 2, "name": "aten::add", "ctrl_deps": 1,
            "inputs": {"values": [], "shapes": [], "types": []},
            "attrs": [{"name": "rf_id", "type": "uint64", "value": 7}, {"name": "tid", "type": "uint64", "value": 1}]}
    with pytest.raises(TraceFormatError, match="PyTorch host execution trace"):
        read_trace(orjson.dumps({"schema": "1.1.1-chakra.0.0.4", "nodes": [node]}))
    # A Chakra JSON node with a duration is not one.
    timed = {**node, "duration_micros": 3}
    assert len(read_trace(orjson.dumps({"nodes": [timed]}))) == 1
