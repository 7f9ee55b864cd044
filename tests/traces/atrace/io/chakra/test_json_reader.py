"""Chakra JSON: nodes with the proto's names or protobuf's JSON names, a bare list of
nodes, and the errors a person can act on (bad JSON, no nodes, a host execution trace)."""

from __future__ import annotations

import io

import orjson
import pytest

from traces.atrace import TraceFormatError
from traces.atrace.io.chakra.json_reader import (
    chakra_from_dict,
    is_host_execution_trace,
    read_chakra,
)


def _names_and_durations(trace):
    return sorted(zip(trace.names(), (int(d) for d in trace.dur.tolist())))


def test_snake_and_camel_field_names_read_the_same():
    snake = chakra_from_dict(
        {
            "nodes": [
                {"id": 1, "name": "a", "type": "COMP_NODE", "duration_micros": 5},
                {"id": 2, "name": "b", "type": "COMP_NODE", "duration_micros": 3, "data_deps": [1]},
            ]
        }
    )
    camel = chakra_from_dict(
        {
            "nodes": [
                {"id": 1, "name": "a", "type": "COMP_NODE", "durationMicros": 5},
                {"id": 2, "name": "b", "type": "COMP_NODE", "durationMicros": 3, "dataDeps": [1]},
            ]
        }
    )
    assert _names_and_durations(snake) == _names_and_durations(camel) == [("a", 5000), ("b", 3000)]
    assert len(snake.edge_src) == len(camel.edge_src) == 1
    # b depends on a: it starts when a ends.
    a, b = snake.names().index("a"), snake.names().index("b")
    assert snake.ts[b] >= snake.ts[a] + snake.dur[a]


def test_a_bare_list_of_nodes_is_a_document():
    data = orjson.dumps([{"id": 0, "name": "x", "type": "COMP_NODE", "duration_micros": 2}])
    assert read_chakra(io.BytesIO(data)).names() == ["x"]


@pytest.mark.parametrize(
    "data, words", [(b'{"nodes": [', "malformed JSON"), (b'{"graph": []}', "needs a 'nodes' list")]
)
def test_a_document_that_is_not_a_chakra_graph_is_refused(data, words):
    with pytest.raises(TraceFormatError, match=words):
        read_chakra(io.BytesIO(data), "up.json")


def test_a_host_execution_trace_is_recognised_and_refused_alone():
    host_et = [
        {"id": 2, "name": "aten::add", "parent": 1, "rf_id": 7},
        {"id": 3, "name": "aten::mm", "parent": 1, "rf_id": 8},
    ]
    assert is_host_execution_trace(host_et)
    assert not is_host_execution_trace([{**n, "duration_micros": 1} for n in host_et])
    with pytest.raises(TraceFormatError):
        chakra_from_dict({"nodes": host_et})
