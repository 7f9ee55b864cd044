"""Chakra protobuf (.et): the real converter output loads, round trips, bad files are refused."""

from __future__ import annotations

import gzip
import re
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from google.protobuf.internal.decoder import _DecodeVarint32
from google.protobuf.internal.encoder import _VarintBytes

from tests.support.traces import real_trace
from traces.atrace import (
    EdgeKind,
    EmptyTraceError,
    Kind,
    TraceBuilder,
    TraceFormatError,
    chakra_et_bytes,
    critical_path,
    operator_breakdown,
    read_trace,
    write_chakra,
    write_chakra_et,
)
from traces.atrace.analysis.communication import communication
from traces.atrace.io.chakra_schema import et_def_pb2 as pb

ROOT = Path(__file__).resolve().parents[5]
SCHEMA = ROOT / "traces" / "atrace" / "io" / "chakra_schema"


@pytest.fixture(scope="module")
def feeder_path():
    return real_trace("chakra_feeder.0.et")


def decode(data: bytes) -> tuple[pb.GlobalMetadata, list[pb.Node]]:
    """An independent decode: length-delimited messages straight into the generated classes."""
    messages, pos = [], 0
    while pos < len(data):
        size, pos = _DecodeVarint32(data, pos)
        messages.append(data[pos:pos + size])
        pos += size
    meta = pb.GlobalMetadata.FromString(messages[0])
    return meta, [pb.Node.FromString(m) for m in messages[1:]]


def attrs_of(node: pb.Node) -> dict:
    return {a.name: getattr(a, a.WhichOneof("value")) for a in node.attr}


@pytest.fixture(scope="module")
def feeder(feeder_path):
    meta, nodes = decode(feeder_path.read_bytes())
    return read_trace(feeder_path), meta, nodes


def _by_node(trace) -> dict[int, int]:
    return {int(trace.args.get(e)["node_id"]): e for e in range(len(trace))}


def test_feeder_loads_every_node_with_its_duration(feeder):
    trace, meta, nodes = feeder
    assert len(nodes) == 3664 and len(trace) == len(nodes)
    assert trace.meta["source"] == "chakra"
    assert trace.meta["chakra"]["global_metadata"]["attr"]["schema"] == "1.0.1"
    event = _by_node(trace)
    for node in nodes:
        e = event[node.id]
        assert trace.names([e])[0] == node.name
        assert int(trace.dur[e]) == node.duration_micros * 1000
    # Device work (is_cpu_op false) lands on accelerator tracks, CPU operators do not.
    for node in nodes:
        assert bool(trace.on_device[event[node.id]]) == (attrs_of(node)["is_cpu_op"] is False)


def test_feeder_dependencies_against_the_raw_nodes(feeder):
    trace, _, nodes = feeder
    ids = {n.id for n in nodes}
    missing = {d for n in nodes for d in [*n.data_deps, *n.ctrl_deps] if d not in ids}
    dangling = sum(d not in ids for n in nodes for d in [*n.data_deps, *n.ctrl_deps])
    info = trace.meta["chakra"]
    assert (info["missing_nodes"], info["dangling_deps"]) == (len(missing), dangling) == (210, 1277)
    assert any("absent from the file" in w for w in trace.meta["warnings"])
    # Every edge is a dependency the file states, of the same kind; every dependency the
    # file states is an edge or counted as dropped (missing, self, containment, bad parent).
    node_of = {e: int(trace.args.get(e)["node_id"]) for e in range(len(trace))}
    raw = {n.id: n for n in nodes}
    for a, z, k in zip(trace.edge_src.tolist(), trace.edge_dst.tolist(), trace.edge_kind.tolist()):
        deps = raw[node_of[z]].data_deps if k == EdgeKind.DATA else raw[node_of[z]].ctrl_deps
        assert node_of[a] in deps
    stated = sum(len(n.data_deps) + len(n.ctrl_deps) for n in nodes)
    dropped = (info["dangling_deps"] + info["self_deps"] + info["containment_deps"]
               + info["dropped_parents"])
    assert len(trace.edge_src) + dropped == stated
    assert info["self_deps"] == sum(n.id in n.ctrl_deps or n.id in n.data_deps for n in nodes)


def test_feeder_schedule_respects_data_deps_and_parent_links(feeder):
    trace, _, _ = feeder
    a, z, kind = trace.edge_src, trace.edge_dst, trace.edge_kind
    data = kind == EdgeKind.DATA
    # Data dependencies finish before their users start; a child starts with or after its
    # parent (a parent link is containment, not order).
    assert (trace.end[a[data]] <= trace.ts[z[data]]).all()
    assert (trace.ts[a[~data]] <= trace.ts[z[~data]]).all()
    cp = critical_path(trace)
    assert cp.length_ns == trace.span()[1] - trace.span()[0] > 0


def test_feeder_collectives(feeder):
    trace, _, nodes = feeder
    event = _by_node(trace)
    colls = [n for n in nodes if "comm_type" in attrs_of(n)]
    assert len(colls) == 7
    for node in colls:
        e = event[node.id]
        args = trace.args.get(e)
        assert trace.kind[e] == Kind.COMM
        assert (args["comm_type"], args["comm_size"]) == (attrs_of(node)["comm_type"], attrs_of(node)["comm_size"])
    device = {r["op"]: r for r in operator_breakdown(trace).to_dict()["device"]}
    allreduce = device["ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)"]
    assert allreduce["kind"] == "comm" and allreduce["count"] == 5
    # The communication analysis sees the file's collectives with their sizes.
    table = {r["collective"]: r for r in communication(trace)["collectives"]}
    for name, enum in (("allreduce", pb.ALL_REDUCE), ("broadcast", pb.BROADCAST)):
        raw = [attrs_of(n) for n in colls if attrs_of(n)["comm_type"] == enum]
        assert table[name]["count"] == len(raw)
        assert table[name]["bytes"] == sum(a["comm_size"] for a in raw)


@pytest.mark.slow  # over 1.5 s on 2 cores: in make test, out of make test-fast
def test_feeder_round_trips_through_protobuf_and_json(feeder, tmp_path):
    trace, _, nodes = feeder
    et = tmp_path / "again.et"
    write_chakra_et(trace, et)
    again = read_trace(et)
    js = tmp_path / "again.chakra.json"
    write_chakra(again, js)
    third = read_trace(js)
    for t in (again, third):
        assert len(t) == len(trace)
        assert (t.dur == trace.dur).all() and (t.ts == trace.ts).all() and (t.kind == trace.kind).all()
        assert t.names(range(len(t))) == trace.names(range(len(trace)))
        assert len(t.edge_src) == len(trace.edge_src)
        assert critical_path(t).length_ns == critical_path(trace).length_ns
        assert [tr.ordered for tr in t.tracks] == [tr.ordered for tr in trace.tracks]
    # The written collectives keep their type and size.
    _, written = decode(et.read_bytes())
    colls = {n.name: attrs_of(n) for n in written if n.type == pb.COMM_COLL_NODE}
    raw = {n.name: attrs_of(n) for n in nodes if "comm_type" in attrs_of(n)}
    assert colls.keys() == raw.keys()
    for name, attrs in colls.items():
        assert attrs["comm_type"] == raw[name]["comm_type"]


def _small_trace() -> TraceBuilder:
    b = TraceBuilder(source="test")
    host = b.track(1, 1, process_name="python", thread_name="main")
    gpu = b.track(0, 7, process_name="GPU 0", thread_name="stream 7")
    comm = b.track(0, 24, process_name="GPU 0", thread_name="stream 24")
    b.add("aten::add", 1_000, 5_000, host, cat="cpu_op")
    b.add("cudaLaunchKernel", 2_000, 1_000, host, kind=Kind.RUNTIME, cat="cuda_runtime", corr=9)
    b.add("tiny_kernel", 6_100, 400, gpu, kind=Kind.KERNEL, cat="kernel", corr=9)  # 0.4 us
    b.add("ncclKernel_AllReduce_RING_LL_Sum_float", 7_000, 2_345, comm, kind=Kind.COMM, cat="kernel",
          args={"comm_size": 4096})
    b.add("ncclDevKernel_ReduceScatter_Sum_f32", 10_000, 1_500, comm, kind=Kind.COMM, cat="kernel",
          args={"Collective name": "reduce_scatter_tensor", "In msg nelems": 1024, "dtype": "BFloat16",
                "Process Group Name": "7"})
    return b


def test_sub_microsecond_durations_survive(tmp_path):
    trace = _small_trace().build()
    data = chakra_et_bytes(trace)
    _, nodes = decode(data)
    tiny = next(n for n in nodes if n.name == "tiny_kernel")
    assert tiny.duration_micros == 1  # a reader of duration_micros alone sees 1 us, not 0
    assert attrs_of(tiny)["duration_ns"] == 400
    again = read_trace(data)
    e = again.names(range(len(again))).index("tiny_kernel")
    assert int(again.dur[e]) == 400
    # Nearest microsecond elsewhere: 2,345 ns is 2 us, 1,500 ns is 2 us.
    durs = {n.name: n.duration_micros for n in nodes}
    assert durs["ncclKernel_AllReduce_RING_LL_Sum_float"] == 2
    assert durs["ncclDevKernel_ReduceScatter_Sum_f32"] == 2


def test_collectives_written_with_comm_type_and_size():
    _, nodes = decode(chakra_et_bytes(_small_trace().build()))
    by_name = {n.name: n for n in nodes}
    ar = by_name["ncclKernel_AllReduce_RING_LL_Sum_float"]
    rs = by_name["ncclDevKernel_ReduceScatter_Sum_f32"]
    assert ar.type == rs.type == pb.COMM_COLL_NODE
    assert attrs_of(ar)["comm_type"] == pb.ALL_REDUCE and attrs_of(ar)["comm_size"] == 4096
    assert attrs_of(rs)["comm_type"] == pb.REDUCE_SCATTER
    assert attrs_of(rs)["comm_size"] == 2048 and attrs_of(rs)["pg_name"] == "7"  # 1024 bf16
    assert by_name["tiny_kernel"].type == pb.COMP_NODE
    # The launch is a data dependency of the kernel it launched; the launch's parent link
    # (ctrl_deps) is the operator around it.
    assert by_name["cudaLaunchKernel"].id in by_name["tiny_kernel"].data_deps
    assert list(by_name["cudaLaunchKernel"].ctrl_deps) == [by_name["aten::add"].id]


def test_kineto_trace_round_trips_json_and_protobuf(gpu_trace, tmp_path):
    trace = read_trace(gpu_trace)
    et, js = tmp_path / "g.et.gz", tmp_path / "g.chakra.json"
    write_chakra_et(trace, et)
    write_chakra(trace, js)
    from_et, from_json = read_trace(et), read_trace(js)
    assert len(from_et) == len(from_json) > 0
    for col in ("ts", "dur", "kind", "track"):
        assert (getattr(from_et, col) == getattr(from_json, col)).all(), col
    assert (from_et.edge_src == from_json.edge_src).all() and (from_et.edge_dst == from_json.edge_dst).all()
    assert critical_path(from_et).length_ns == critical_path(from_json).length_ns
    assert from_et.args.get(0) == from_json.args.get(0)


def test_bytes_without_a_name_are_sniffed_as_et(feeder_path):
    assert len(read_trace(feeder_path.read_bytes())) == 3664
    assert len(read_trace(gzip.compress(feeder_path.read_bytes()))) == 3664


def _delimited(message) -> bytes:
    return _VarintBytes(message.ByteSize()) + message.SerializeToString()


META = _delimited(pb.GlobalMetadata(version="0.0.4"))


@pytest.mark.parametrize(
    ("content", "error", "words"),
    [
        (b"", EmptyTraceError, "empty file"),
        (META, EmptyTraceError, "no nodes"),
        (b"this is not a Chakra trace at all", TraceFormatError, "declares 116 bytes"),
        (META + b"\x05\xff\xff\xff\xff\xff", TraceFormatError, "not a valid Chakra message"),
        (META + _delimited(pb.Node(id=1, type=42)), TraceFormatError, "unknown node type 42"),
        (META + _delimited(pb.Node(id=1)) + _delimited(pb.Node(id=1)), TraceFormatError, "duplicate node id 1"),
        (META + b"\xff\xff", TraceFormatError, "length prefix is cut off"),
    ],
)
def test_bad_et_files(tmp_path, content, error, words):
    path = tmp_path / "bad.et"
    path.write_bytes(content)
    with pytest.raises(error) as exc:
        read_trace(path)
    assert words in str(exc.value) and str(path) in str(exc.value)


def test_truncated_feeder_names_the_cut(feeder_path, tmp_path):
    data = feeder_path.read_bytes()
    path = tmp_path / "cut.et"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(TraceFormatError, match=r"byte \d+: message #\d+ declares \d+ bytes but only \d+ are left"):
        read_trace(path)


def test_host_execution_trace_is_refused():
    host_et = real_trace("simple_add_host_et.json.gz")
    with pytest.raises(TraceFormatError) as exc:
        read_trace(host_et)
    assert "PyTorch host execution trace" in str(exc.value) and "Kineto" in str(exc.value)
    # Its Kineto trace, recorded with it, reads.
    assert len(read_trace(real_trace("simple_add_kineto.json.gz"))) > 0


@pytest.mark.slow  # converts a 3 MB Chakra trace both ways: seconds of CPU (make test runs it, make test-fast does not)
def test_cli_converts_to_and_from_et(feeder_path, tmp_path, capsys):
    from traces.atrace.cli import main

    out = tmp_path / "copy.et"
    assert main(["convert", str(feeder_path), str(out)]) == 0
    _, nodes = decode(out.read_bytes())
    assert len(nodes) == 3664
    js = tmp_path / "copy.chakra.json"
    assert main(["convert", str(out), str(js)]) == 0
    assert read_trace(js).meta["source"] == "chakra"
    other = tmp_path / "copy.bin"
    assert main(["convert", str(js), str(other), "--to", "chakra-et"]) == 0
    assert len(decode(other.read_bytes())[1]) == 3664
    capsys.readouterr()
    assert main(["summary", str(out), "--json"]) == 0
    assert '"source": "chakra"' in capsys.readouterr().out


def test_generated_module_is_current_and_matches_the_runtime_bound(tmp_path):
    """`make proto` regenerates the committed module byte for byte, and requirements.txt
    asks for a protobuf runtime the generated code accepts."""
    pytest.importorskip("grpc_tools", reason="grpcio-tools (requirements-dev.txt) is not installed")
    subprocess.run(
        [sys.executable, "-m", "grpc_tools.protoc", f"-I{SCHEMA}", f"--python_out={tmp_path}",
         f"--pyi_out={tmp_path}", str(SCHEMA / "et_def.proto")],
        check=True,
    )
    for name in ("et_def_pb2.py", "et_def_pb2.pyi"):
        assert (tmp_path / name).read_text() == (SCHEMA / name).read_text(), name
    generated = (SCHEMA / "et_def_pb2.py").read_text()
    version = re.search(r"Protobuf Python Version: (\d+)\.(\d+)\.(\d+)", generated).groups()
    bound = re.search(r"^protobuf>=([\d.]+),<(\d+)$", (ROOT / "requirements.txt").read_text(), re.M)
    assert bound, "requirements.txt must bound protobuf"
    assert tuple(int(x) for x in bound.group(1).split(".")) == tuple(int(x) for x in version)
    assert int(bound.group(2)) == int(version[0]) + 1
    assert (SCHEMA / "NOTICE").exists() and "Apache License" in (SCHEMA / "LICENSE").read_text()


@pytest.mark.slow  # over 1.5 s on 2 cores: in make test, out of make test-fast
def test_real_nccl_kernels_written_as_collectives_with_size():
    kineto = real_trace("ddp_nccl_rank0.json.gz")
    raw = [e for e in orjson.loads(gzip.decompress(kineto.read_bytes()))["traceEvents"]
           if e.get("cat") == "kernel" and "nccl" in e["name"]]
    elem = {"Float": 4, "Long": 8}
    expected = sorted((e["args"]["Collective name"], e["args"]["In msg nelems"] * elem[e["args"]["dtype"]])
                      for e in raw)
    _, nodes = decode(chakra_et_bytes(read_trace(kineto)))
    names = {pb.ALL_REDUCE: "allreduce", pb.BROADCAST: "broadcast"}
    written = sorted((names[attrs_of(n)["comm_type"]], attrs_of(n)["comm_size"])
                     for n in nodes if n.type == pb.COMM_COLL_NODE)
    assert len(expected) == 21 and written == expected


def test_write_chakra_to_an_et_name_writes_protobuf(tmp_path):
    trace = _small_trace().build()
    path = tmp_path / "named.et"
    write_chakra(trace, path)
    _, nodes = decode(path.read_bytes())
    assert len(nodes) == len(trace)
    assert len(read_trace(path)) == len(trace)
