"""Opening a trace: plain or gzipped from a path, bytes or a stream that cannot seek; the
guards against gzip bombs, oversize and broken gzip; and sniffing the format from the head."""

from __future__ import annotations

import gzip
import io

import orjson
import pytest

from traces.atrace import TraceFormatError, TraceTooLargeError, read_trace
from traces.atrace.io.opening import Peeked, open_trace_stream, sniff_format

GOOD = [
    {"ph": "X", "name": "a", "cat": "cpu_op", "pid": 1, "tid": 1, "ts": 1.0, "dur": 5.0},
    {"ph": "X", "name": "b", "cat": "cpu_op", "pid": 1, "tid": 1, "ts": 2.0, "dur": 1.0},
]


def _doc(events, **top):
    return orjson.dumps({"traceEvents": events, **top})


class _OneWay(io.RawIOBase):
    """A stream that only reads forward, as a socket or a pipe."""

    def __init__(self, data: bytes):
        self._inner = io.BytesIO(data)

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False

    def read(self, n: int = -1) -> bytes:
        return self._inner.read(n)


def _read_all(stream) -> bytes:
    out = b""
    while chunk := stream.read(1 << 16):
        out += chunk
    return out


@pytest.mark.parametrize("squeeze", [False, True], ids=["plain", "gzip"])
def test_a_stream_that_cannot_seek_gives_the_whole_text_back(squeeze):
    text = _doc(GOOD * 50)
    stream, where, closers = open_trace_stream(_OneWay(gzip.compress(text) if squeeze else text))
    assert _read_all(stream) == text
    assert where == "<stream>"
    for c in closers:
        c.close()


def test_bytes_and_a_path_read_the_same_and_name_where_they_came_from(tmp_path):
    path = tmp_path / "t.json.gz"
    path.write_bytes(gzip.compress(_doc(GOOD)))
    from_path, where, closers = open_trace_stream(path)
    assert where == str(path)
    assert _read_all(from_path) == _doc(GOOD)
    for c in closers:
        c.close()
    from_bytes, where, _ = open_trace_stream(path.read_bytes())
    assert where == "<bytes>" and _read_all(from_bytes) == _doc(GOOD)


@pytest.mark.slow  # inflates a gzip bomb up to the parse limit: seconds of CPU (make test runs it, make test-fast does not)
def test_gzip_bomb():
    bomb = gzip.compress(b'{"traceEvents": [' + b" " * (300 << 20), compresslevel=9)
    assert len(bomb) < 1 << 20
    with pytest.raises(TraceTooLargeError) as exc:
        read_trace(bomb)
    assert "gzip bomb" in str(exc.value)


def test_size_limit():
    with pytest.raises(TraceTooLargeError):
        read_trace(gzip.compress(_doc(GOOD * 1000)), max_bytes=10_000)


def test_truncated_gzip():
    data = gzip.compress(_doc(GOOD * 1000))
    with pytest.raises(TraceFormatError, match="gzip"):
        read_trace(data[: len(data) // 2])


def test_missing_file(tmp_path):
    with pytest.raises(TraceFormatError, match="cannot open"):
        read_trace(tmp_path / "nope.json")


@pytest.mark.parametrize(
    "head, fmt",
    [
        (b'  [{"ph": "X"}', "chrome"),
        (b'{"nodes": [{"id": 1}], "traceEvents": []', "chakra"),
        (b'{"traceEvents": [{"name": "nodes"}], "nodes": 1', "chrome"),
        (b'{"schemaVersion": 1, "traceEvents": [', "kineto"),
        (b'{"traceEvents": [{"cat": "cpu_op"', "kineto"),
        (b'{"traceEvents": [{"cat": "gpu"', "chrome"),
    ],
)
def test_the_format_is_sniffed_from_the_first_bytes(head, fmt):
    assert sniff_format(head) == fmt


def test_a_peeked_stream_gives_its_head_back_before_the_rest():
    peeked = Peeked(b"abcd", io.BytesIO(b"efgh"))
    assert peeked.read(2) == b"ab"
    assert peeked.read(3) == b"cde"
    assert peeked.read() == b"fgh"
