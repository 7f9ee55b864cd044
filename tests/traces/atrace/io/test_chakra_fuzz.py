"""Any Chakra input, JSON or protobuf, reads or raises the engine's own error (never a crash)."""

from __future__ import annotations

import orjson
import pytest
from google.protobuf.internal.encoder import _VarintBytes
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.examples import examples
from traces.atrace import TraceError, read_trace
from traces.atrace.io.chakra_schema import et_def_pb2 as pb

SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**63), 2**64 - 1), st.floats(allow_nan=True),
    st.text(max_size=6), st.sampled_from(["1.5", "-3", "abc", "1e400", "COMM_COLL_NODE"]),
)
VALUES = st.one_of(SCALARS, st.lists(SCALARS, max_size=3), st.dictionaries(st.text(max_size=4), SCALARS, max_size=2))
ATTR_NAMES = st.sampled_from([
    "is_cpu_op", "kind", "tid", "pid", "stream", "comm_type", "comm_size", "correlation",
    "duration_ns", "start_time_ns", "op_type", "category", "dur", "unordered", "process_name",
])
ATTR_KEYS = st.sampled_from(["int64_val", "string_val", "bool_val", "double_val", "int64_list", "value"])
NODE_KEYS = st.sampled_from([
    "id", "name", "type", "data_deps", "ctrl_deps", "duration_micros", "start_time_micros",
    "dataDeps", "inputs", "parent",
])


@st.composite
def json_nodes(draw):
    nodes = []
    for i in range(draw(st.integers(0, 5))):
        node = {"id": draw(st.one_of(st.just(i), VALUES))}
        node.update(draw(st.dictionaries(NODE_KEYS, st.one_of(VALUES, st.lists(st.integers(-1, 6), max_size=3)), max_size=5)))
        attrs = draw(st.lists(st.fixed_dictionaries({"name": ATTR_NAMES}, optional={"x": st.just(0)}).flatmap(
            lambda a: st.builds(lambda k, v: {**a, k: v}, ATTR_KEYS, VALUES)), max_size=4))
        node["attr"] = attrs
        nodes.append(node)
    return nodes


@pytest.mark.slow  # hundreds of generated graphs: seconds of CPU (make test runs it, make test-fast does not)
@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(json_nodes())
def test_any_json_graph_reads_or_raises_a_trace_error(nodes):
    try:
        trace = read_trace(orjson.dumps({"nodes": nodes}))
    except TraceError as exc:
        assert exc.what and exc.where  # says what is wrong, and where
    else:
        assert len(trace) == len(nodes) and (trace.dur >= 0).all()


def _attr(name, which, value):
    a = pb.AttributeProto(name=name)
    if which.endswith("_list"):
        getattr(a, which).values.extend(value)
    else:
        setattr(a, which, value)
    return a


PB_ATTRS = st.one_of(
    st.builds(_attr, ATTR_NAMES, st.just("int64_val"), st.integers(-(2**63), 2**63 - 1)),
    st.builds(_attr, ATTR_NAMES, st.just("string_val"), st.text(max_size=5)),
    st.builds(_attr, ATTR_NAMES, st.just("bool_val"), st.booleans()),
    st.builds(_attr, ATTR_NAMES, st.just("double_val"), st.floats()),
    st.builds(_attr, ATTR_NAMES, st.just("bytes_val"), st.binary(max_size=4)),
    st.builds(_attr, ATTR_NAMES, st.just("int64_list"), st.lists(st.integers(-5, 5), max_size=3)),
    st.builds(_attr, ATTR_NAMES, st.just("string_list"), st.lists(st.text(max_size=3), max_size=3)),
)


@st.composite
def et_files(draw):
    parts = [pb.GlobalMetadata(version="0.0.4")]
    for _ in range(draw(st.integers(0, 5))):
        parts.append(pb.Node(
            id=draw(st.integers(0, 6)),
            name=draw(st.text(max_size=5)),
            type=draw(st.integers(0, 9)),
            ctrl_deps=draw(st.lists(st.integers(0, 7), max_size=2)),
            data_deps=draw(st.lists(st.integers(0, 7), max_size=3)),
            start_time_micros=draw(st.integers(0, 2**64 - 1)),
            duration_micros=draw(st.integers(0, 2**64 - 1)),
            attr=draw(st.lists(PB_ATTRS, max_size=4)),
        ))
    data = b"".join(_VarintBytes(m.ByteSize()) + m.SerializeToString() for m in parts)
    cut = draw(st.one_of(st.none(), st.integers(0, len(data))))
    noise = draw(st.binary(max_size=6))
    return (data if cut is None else data[:cut]) + noise


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(et_files())
def test_any_et_file_reads_or_raises_a_trace_error(tmp_path_factory, data):
    path = tmp_path_factory.mktemp("fuzz") / "f.et"
    path.write_bytes(data)
    try:
        trace = read_trace(path)
    except TraceError as exc:
        assert exc.what and str(path) in str(exc)
    else:
        assert len(trace) > 0 and (trace.dur >= 0).all()
