"""Reading a trace in any format: the format found from the first bytes (or named), the
same trace read by one process or two, and a named format that does not exist refused."""

from __future__ import annotations

import gzip

import numpy as np
import orjson
import pytest

from traces.atrace import TraceFormatError, read_trace

EVENTS = [
    {"ph": "X", "name": f"op{k}", "cat": "cpu_op", "pid": 1, "tid": 1, "ts": k * 10, "dur": 5}
    for k in range(400)
]
CHROME = orjson.dumps({"traceEvents": EVENTS})
CHAKRA = orjson.dumps(
    {"nodes": [{"id": 0, "name": "n0", "type": "COMP_NODE", "duration_micros": 4}]}
)


def test_chrome_and_chakra_are_told_apart_by_their_first_bytes():
    assert read_trace(CHROME).names()[:2] == ["op0", "op1"]
    assert read_trace(gzip.compress(CHAKRA)).names() == ["n0"]


def test_a_named_format_overrides_the_sniffing_and_an_unknown_one_is_refused():
    with pytest.raises(TraceFormatError, match="unknown format 'perfetto'"):
        read_trace(CHROME, format="perfetto")
    with pytest.raises(TraceFormatError):
        read_trace(CHROME, format="chakra")  # a Chrome document has no nodes


def test_one_process_or_two_read_the_same_trace(tmp_path):
    path = tmp_path / "t.json"
    path.write_bytes(CHROME)
    one, two = read_trace(path, workers=1), read_trace(path, workers=2)
    assert one.names() == two.names() and len(one) == len(EVENTS)
    assert np.array_equal(one.ts, two.ts) and np.array_equal(one.dur, two.dur)
