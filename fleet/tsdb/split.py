"""Splitting a remote-write request in two, to send it in smaller pieces.

A WriteRequest is a sequence of protobuf fields: each TimeSeries is field 1 (its labels and
samples inside), metadata field 3. Splitting needs no schema: the request's top-level fields
are cut into two runs of whole fields, each run a valid WriteRequest of its own. The writer
(fleet/tsdb/sending.py) splits a request the store calls malformed, to find the series it
refuses, and one a proxy finds too large (413).
"""

from __future__ import annotations

import cramjam

from fleet.tsdb.buffer import Batch

_SAMPLE = 2 << 3 | 2  # TimeSeries field 2 (a Sample), length-delimited


def _varint(buf: bytes | memoryview, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(buf) or shift > 63:
            raise ValueError("truncated varint")
        byte = buf[pos]
        value |= (byte & 0x7F) << shift
        pos += 1
        if byte < 0x80:
            return value, pos
        shift += 7


def _fields(buf: bytes | memoryview):
    """(tag, start, payload start, end) of each top-level field of a protobuf message."""
    pos = 0
    while pos < len(buf):
        start = pos
        tag, pos = _varint(buf, pos)
        wire = tag & 7
        if wire == 0:
            _, pos = _varint(buf, pos)
            payload = pos
        elif wire == 1:
            payload, pos = pos, pos + 8
        elif wire == 5:
            payload, pos = pos, pos + 4
        elif wire == 2:
            length, payload = _varint(buf, pos)
            pos = payload + length
        else:
            raise ValueError(f"unsupported wire type {wire}")
        if pos > len(buf):
            raise ValueError("field runs past the end of the message")
        yield tag, start, payload, pos


def series(raw: bytes) -> list[tuple[bytes, int]]:
    """The request's top-level fields (each whole, tag included) with the samples each holds
    (a TimeSeries' count of Sample fields; 0 for anything else). ValueError if it is not a
    protobuf message."""
    view = memoryview(raw)
    out = []
    for tag, start, payload, end in _fields(view):
        samples = 0
        if tag == (1 << 3 | 2):
            samples = sum(1 for inner, *_ in _fields(view[payload:end]) if inner == _SAMPLE)
        out.append((bytes(view[start:end]), samples))
    return out


def halves(batch: Batch) -> list[Batch]:
    """The batch as two requests of about half its series each, in order (none if it holds
    a single field, or cannot be read: then it cannot be split)."""
    try:
        parts = series(bytes(cramjam.snappy.decompress_raw(batch.body)))
    except (ValueError, cramjam.DecompressionError):
        return []
    if len(parts) < 2:
        return []
    middle = len(parts) // 2
    return [_batch(batch, parts[:middle]), _batch(batch, parts[middle:])]


def _batch(batch: Batch, parts: list[tuple[bytes, int]]) -> Batch:
    body = b"".join(field for field, _ in parts)
    return Batch(batch.cycle_ms, batch.scope, sum(n for _, n in parts), bytes(cramjam.snappy.compress_raw(body)))
