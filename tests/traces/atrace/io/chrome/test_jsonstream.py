"""Streaming reads: chunk boundaries anywhere give the same trace; memory stays bounded."""

from __future__ import annotations

import gzip
import io
import tracemalloc

import numpy as np
import orjson
import pytest

from tests.support.tracegen import write_kineto_trace
from traces.atrace import operator_breakdown, read_trace
from traces.atrace.io.chrome.jsonstream import ChromeEventStream
from traces.atrace.io.chrome.reader import _EVENTS_DECODER, read_chrome

TRICKY = [
    {"ph": "X", "name": 'quote " and brace } and ], "},{"', "cat": "cpu_op", "pid": 1, "tid": 1,
     "ts": 1.5, "dur": 2.25, "args": {"nested": {"deep": [1, {"x": "}"}]}, "path": "C:\\\\dir\\\\"}},
    {"ph": "X", "name": "back\\\\slash\\\"", "cat": "kernel", "pid": 0, "tid": 7, "ts": 3.0, "dur": 1.0,
     "args": {"correlation": 5, "s": "\\\\\\\\\""}},
    {"ph": "X", "name": "launch", "cat": "cuda_runtime", "pid": 1, "tid": 1, "ts": 2.0, "dur": 0.5,
     "args": {"correlation": 5}},
    {"ph": "i", "name": "mark", "pid": 1, "tid": 1, "ts": 2.0, "s": "t"},
    {"ph": "C", "name": "mem", "pid": 1, "ts": 2.0, "args": {"bytes": 10}},
    {"ph": "B", "name": "range", "pid": 1, "tid": 2, "ts": 1.0, "args": {"a": 1}},
    {"ph": "E", "pid": 1, "tid": 2, "ts": 4.0, "args": {"b": 2}},
]


def _columns(trace):
    order = np.lexsort((trace.name, trace.dur, trace.ts))
    return [trace.names(order), trace.ts[order].tolist(), trace.dur[order].tolist(),
            [trace.args.get(int(i)) for i in order], trace.corr[order].tolist()]


@pytest.mark.parametrize("chunk", [7, 13, 64, 1000, 1 << 20])
def test_any_chunk_size_gives_the_same_trace(chunk):
    data = orjson.dumps({"displayTimeUnit": "ns", "traceEvents": TRICKY * 20,
                         "distributedInfo": {"rank": 3}})
    whole = read_trace(data)
    parts = read_chrome(io.BytesIO(data), "t", chunk_size=chunk)
    assert _columns(parts) == _columns(whole)
    assert parts.meta["distributedInfo"] == {"rank": 3}
    assert len(whole) == 6 * 20
    assert TRICKY[0]["name"] in whole.strings.strings
    assert TRICKY[1]["name"] in whole.strings.strings
    b = whole.find_name("range")
    k = int(np.flatnonzero(whole.name == b)[0])
    assert whole.dur[k] == 3000 and whole.args.get(k) == {"a": 1, "b": 2}


def test_gzip_and_plain_agree(tmp_path):
    plain = tmp_path / "t.json"
    write_kineto_trace(plain, 3000, seed=1)
    gz = tmp_path / "t.json.gz"
    gz.write_bytes(gzip.compress(plain.read_bytes()))
    a, b = read_trace(plain), read_trace(gz)
    assert _columns(a) == _columns(b)
    assert operator_breakdown(a).to_dict() == operator_breakdown(b).to_dict()


def test_names_holding_brace_comma_keep_the_fast_cut(tmp_path):
    """Templated kernel names ('{lambda(float)#1}, at::...') hold '},' inside a string: the
    cut between events skips them, so every chunk is decoded without the exact scan."""
    path = tmp_path / "t.json"
    write_kineto_trace(path, 20_000, seed=3)
    assert b"}, at::" in path.read_bytes()
    with path.open("rb") as f:
        stream = ChromeEventStream(f, chunk_size=1 << 16, decode=_EVENTS_DECODER.decode)
        count = sum(len(events) for events, _ in stream.batches())
    assert stream.fast_failures == 0
    assert count == len(orjson.loads(path.read_bytes())["traceEvents"])
    assert _columns(read_chrome(io.BytesIO(path.read_bytes()), chunk_size=1 << 16)) == _columns(read_trace(path))


def _peak_bytes(path) -> tuple[int, int]:
    tracemalloc.start()
    trace = read_trace(path)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak, len(trace)


@pytest.mark.slow  # 200k generated events read under tracemalloc: seconds of CPU
def test_memory_grows_with_events_not_with_json_text(tmp_path):
    """Peak memory per event stays flat as the file grows, and well under the file size."""
    small, big = tmp_path / "small.json", tmp_path / "big.json"
    write_kineto_trace(small, 40_000, seed=2)
    write_kineto_trace(big, 160_000, seed=2)
    peak_small, n_small = _peak_bytes(small)
    peak_big, n_big = _peak_bytes(big)
    size_big = big.stat().st_size
    # Well under the JSON text (a 1 GB trace needs well under 10 GB) ...
    assert peak_big < 2.0 * size_big, (peak_big, size_big)
    # ... and each further event costs a few hundred bytes, not its JSON text again.
    per_event = (peak_big - peak_small) / (n_big - n_small)
    assert per_event < 400, per_event


@pytest.mark.parametrize(
    "prefix",
    [
        b'{"note": "\\"traceEvents\\": [ is not where the events are", ',
        b'{"meta": {"traceEvents": [{"ph": "X", "name": "decoy", "ts": 0, "dur": 1}]}, ',
        b'{"traceEventsCount": 3, ',
    ],
)
def test_only_the_top_level_trace_events_key_counts(prefix):
    data = prefix + b'"traceEvents": ' + orjson.dumps(TRICKY) + b"}"
    trace = read_trace(io.BytesIO(data))
    assert "decoy" not in trace.names(np.arange(len(trace)))
    assert len(trace) == len(read_trace(io.BytesIO(orjson.dumps({"traceEvents": TRICKY}))))
