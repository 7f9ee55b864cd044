"""Reading a trace in any supported format: Chrome trace event JSON, PyTorch profiler (Kineto)
JSON, Chakra JSON and Chakra protobuf (``.et``).

:func:`read_trace` takes a path, bytes or a binary file, plain or gzipped, finds out which
format it holds and returns a :class:`~traces.atrace.model.trace.Trace`. It reads Chrome and
Kineto JSON as a stream (:mod:`.chrome_reader`), so memory grows with the number of events
kept in columns, not with the size of the JSON text.

Any problem raises a :class:`~traces.atrace.errors.TraceError` naming what and where; no
partial trace is ever returned.
"""

from __future__ import annotations

import os
from typing import BinaryIO

from ..errors import TraceFormatError
from ..model.trace import Trace
from .chakra_et import looks_like_chakra_et, read_chakra_et
from .chakra_json import read_chakra
from .chrome_reader import read_chrome
from .opening import MAX_DECOMPRESSED_BYTES, Peeked, open_trace_stream, sniff_format


def read_trace(
    source: str | os.PathLike | bytes | BinaryIO,
    *,
    format: str | None = None,  # noqa: A002 - the natural name
    max_bytes: int = MAX_DECOMPRESSED_BYTES,
    chunk_size: int | None = None,
) -> Trace:
    """Read a trace in any supported format (plain or gzipped) into a :class:`Trace`."""
    stream, where, closers = open_trace_stream(source, max_bytes=max_bytes)
    try:
        head = stream.read(1 << 16)
        fmt = format or sniff_format(head)
        full = Peeked(head, stream)
        if format is None and looks_like_chakra_et(head, where):
            fmt = "chakra-et"
        if fmt == "chakra-et":
            return read_chakra_et(full, where)
        if fmt == "chakra":
            return read_chakra(full, where)
        if fmt not in ("chrome", "kineto"):
            raise TraceFormatError(f"unknown format {fmt!r}", where)
        return read_chrome(full, where, chunk_size=chunk_size)
    finally:
        for c in reversed(closers):
            c.close()

