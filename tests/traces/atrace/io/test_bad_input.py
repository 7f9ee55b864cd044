"""Bad input: a specific error with what and where, and never a partial result."""

from __future__ import annotations

import io

import orjson
import pytest

from traces.atrace import (
    EmptyTraceError,
    TraceError,
    TraceFormatError,
    TraceGraphError,
    read_trace,
)
from traces.atrace.io.chrome.reader import read_chrome


def _doc(events, **top):
    return orjson.dumps({"traceEvents": events, **top})


GOOD = [
    {"ph": "X", "name": "a", "cat": "cpu_op", "pid": 1, "tid": 1, "ts": 1.0, "dur": 5.0},
    {"ph": "X", "name": "b", "cat": "cpu_op", "pid": 1, "tid": 1, "ts": 2.0, "dur": 1.0},
]


def test_good_document_reads():
    assert len(read_trace(_doc(GOOD))) == 2


@pytest.mark.parametrize("cut", [1, 20, 60, 100, -2])
def test_truncated_json(cut):
    data = _doc(GOOD * 50)
    with pytest.raises(TraceFormatError) as exc:
        read_trace(data[:cut] if cut > 0 else data[:cut])
    assert "truncated" in str(exc.value) or "malformed" in str(exc.value)


def test_truncated_in_the_middle_of_a_big_file_reports_the_byte():
    data = _doc(GOOD * 5000)
    with pytest.raises(TraceFormatError) as exc:
        read_chrome(io.BytesIO(data[: len(data) // 2]), "big.json", chunk_size=4096)
    assert exc.value.where.startswith("big.json, byte ")


@pytest.mark.parametrize(
    ("data", "words"),
    [
        (b'{"nodes_x": 1}', "traceEvents"),
        (b'{"traceEvents": {"a": 1}}', "traceEvents"),
        (b'"just a string"', "start with"),
        (b"\x00\x01binary", "start with"),
        (_doc([1, 2, 3]), "object"),
        (_doc([{"ph": "X", "name": "a", "ts": "soon", "dur": 1}]), "ts"),
        (_doc([{"ph": "X", "name": "a", "dur": 1}]), "no 'ts'"),
        (_doc([{"ph": "X", "name": 5, "ts": 1, "dur": 1}]), "name"),
        (_doc([{"name": "a", "ts": 1, "dur": 1}]), "no 'ph'"),
        (_doc([{"ph": "X", "name": "a", "ts": 1, "dur": 1, "args": [1, 2]}]), "args"),
        (b'{"nodes": [{"name": "no id"}]}', "id"),
    ],
)
def test_wrong_schema(data, words):
    with pytest.raises(TraceFormatError) as exc:
        read_trace(data)
    assert words in str(exc.value)


def test_error_names_the_event():
    events = GOOD * 10 + [{"ph": "X", "name": "bad", "ts": "x", "dur": 1}]
    with pytest.raises(TraceFormatError) as exc:
        read_trace(_doc(events))
    assert "traceEvents[20]" in exc.value.where


def test_unknown_phase():
    with pytest.raises(TraceFormatError) as exc:
        read_trace(_doc([*GOOD, {"ph": "Q", "name": "odd", "ts": 1, "pid": 1, "tid": 1}]))
    assert "unknown phase 'Q'" in str(exc.value) and "traceEvents[2]" in exc.value.where


@pytest.mark.parametrize(
    "events",
    [
        [{"ph": "X", "name": "neg", "ts": 10, "dur": -1, "pid": 1, "tid": 1}],
        [{"ph": "B", "name": "neg", "ts": 10, "pid": 1, "tid": 1},
         {"ph": "E", "ts": 5, "pid": 1, "tid": 1}],
    ],
)
def test_negative_durations(events):
    with pytest.raises(TraceFormatError) as exc:
        read_trace(_doc(events))
    assert "negative duration" in str(exc.value)


def test_chakra_negative_duration_and_cycle():
    with pytest.raises(TraceFormatError, match="negative duration"):
        read_trace(b'{"nodes": [{"id": 1, "duration_micros": -3}]}')
    with pytest.raises(TraceGraphError, match="cycle"):
        read_trace(b'{"nodes": [{"id": 1, "data_deps": [2]}, {"id": 2, "data_deps": [1]}]}')


@pytest.mark.parametrize("data", [b"", b"   \n", _doc([]), b"[]", b'{"nodes": []}',
                                  _doc([{"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "x"}}])])
def test_empty_trace(data):
    with pytest.raises(TraceError) as exc:
        read_trace(data)
    assert isinstance(exc.value, EmptyTraceError | TraceFormatError)


def test_bare_array_without_closing_bracket_is_allowed():
    data = b"[" + b",\n".join(orjson.dumps(e) for e in GOOD)
    assert len(read_trace(data)) == 2
