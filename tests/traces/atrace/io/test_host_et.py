"""A PyTorch host execution trace: refused alone, linked to its Kineto trace on request."""

from __future__ import annotations

import gzip

import orjson
import pytest

from tests.support.traces import real_trace
from traces.atrace import TraceFormatError, chakra_et_bytes, link_host_et, read_trace
from traces.atrace.io.chakra_schema import et_def_pb2 as pb

from .chakra.test_et import attrs_of, decode

HOST_ET = "simple_add_host_et.json.gz"
KINETO = "simple_add_kineto.json.gz"


@pytest.fixture(scope="module")
def pair():
    et = orjson.loads(gzip.decompress(real_trace(HOST_ET).read_bytes()))
    kineto = orjson.loads(gzip.decompress(real_trace(KINETO).read_bytes()))
    return et, kineto


def test_linked_operators_get_their_times_from_kineto_and_schemas_from_the_et(pair):
    et, kineto = pair
    trace = link_host_et(real_trace(HOST_ET), real_trace(KINETO))
    operators = [n for n in et["nodes"] if n["rf_id"] > 0]
    assert trace.meta["host_et"] == {"nodes": len(operators), "linked": 36, "unlinked": 0}
    # Independently: the Kineto host events by External id.
    host = {e["args"]["External id"]: e for e in kineto["traceEvents"]
            if e.get("cat") in ("cpu_op", "user_annotation") and e.get("ph") == "X"}
    linked = {}
    for e in range(len(trace)):
        args = trace.args.get(e)
        if "et_id" in args:
            linked[args["et_id"]] = (e, args)
    for node in operators:
        e, args = linked[node["id"]]
        source = host[node["rf_id"]]
        assert trace.names([e])[0] == node["name"] == source["name"]
        assert int(trace.dur[e]) == round(source["dur"] * 1000)
        assert args.get("op_schema") == (node["op_schema"] or None)
        assert orjson.loads(args.get("input_shapes", "[]")) == node["input_shapes"]
        assert orjson.loads(args.get("output_types", "[]")) == node["output_types"]


def test_linked_pair_writes_a_chakra_trace_with_durations_and_shapes(pair):
    et, _ = pair
    _, nodes = decode(chakra_et_bytes(link_host_et(real_trace(HOST_ET), real_trace(KINETO))))
    adds = [n for n in nodes if n.name == "aten::add"]
    assert len(adds) == 2
    for n in adds:
        assert n.duration_micros > 0
        assert n.inputs.shapes == "[[256,256],[256,256],[]]"
        assert n.inputs.types == '["Tensor(float)","Tensor(float)","Int"]'
        assert attrs_of(n)["op_schema"].startswith("aten::add.Tensor")
    kernels = [n for n in nodes if not attrs_of(n)["is_cpu_op"]]
    assert kernels and all(n.type == pb.COMP_NODE and n.duration_micros > 0 for n in kernels)


def test_a_kineto_trace_of_another_run_does_not_link(pair):
    other = real_trace("cpu_only_rank34.json.gz")
    with pytest.raises(TraceFormatError, match="same run"):
        link_host_et(real_trace(HOST_ET), other)


def test_bad_host_et_files(tmp_path):
    bad = tmp_path / "et.json"
    kineto = tmp_path / "kineto.json"  # never read: the host ET is refused first
    bad.write_bytes(b'{"nodes": [{"id": 1, "name": "x"}]}')
    with pytest.raises(TraceFormatError, match=r"nodes\[0\]: node has no integer 'rf_id'"):
        link_host_et(bad, kineto)
    bad.write_bytes(b'{"nodes": ')
    with pytest.raises(TraceFormatError, match="malformed JSON"):
        link_host_et(bad, kineto)
    bad.write_bytes(b'[1, 2]')
    with pytest.raises(TraceFormatError, match="'nodes' list"):
        link_host_et(bad, kineto)


def test_cli_links_on_request(pair, tmp_path, capsys):
    from traces.atrace.cli import main

    out = tmp_path / "linked.et"
    assert main(["convert", str(real_trace(KINETO)), str(out), "--host-et", str(real_trace(HOST_ET))]) == 0
    assert any(n.inputs.shapes for n in decode(out.read_bytes())[1])
    assert main(["summary", str(real_trace(HOST_ET))]) == 2
    assert "--host-et" in capsys.readouterr().err
    assert len(read_trace(out)) > 0
