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
from .chakra.et import looks_like_chakra_et, read_chakra_et
from .chakra.json_reader import read_chakra
from .chrome.parallel import parallel_possible, read_chrome_file
from .chrome.reader import read_chrome
from .opening import MAX_DECOMPRESSED_BYTES, Peeked, open_trace_stream, sniff_format


def read_trace(
    source: str | os.PathLike | bytes | BinaryIO,
    *,
    format: str | None = None,  # noqa: A002 - the natural name
    max_bytes: int = MAX_DECOMPRESSED_BYTES,
    chunk_size: int | None = None,
    workers: int | None = None,
) -> Trace:
    """Read a trace in any supported format (plain or gzipped) into a :class:`Trace`.

    A large plain Chrome / Kineto JSON file given by path is decoded by two processes
    (:mod:`.chrome_parallel`) where that is possible; ``workers=1`` keeps to one,
    ``workers=2`` uses two whatever the size. The trace is the same either way.
    """
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
        if _two_processes(source, closers, workers, max_bytes):
            return read_chrome_file(source, where, chunk_size=chunk_size)
        return read_chrome(full, where, chunk_size=chunk_size)
    finally:
        for c in reversed(closers):
            c.close()



def _two_processes(source, closers: list, workers: int | None, max_bytes: int) -> bool:
    """Whether to read with two processes: a plain file, given by path, within the size
    limit, and either asked for (``workers=2``) or large enough on a machine that can."""
    if workers == 1 or not isinstance(source, str | os.PathLike) or len(closers) != 1:
        return False  # a stream, bytes, or a gzipped file (a second closer: the decompressor)
    size = os.fstat(closers[0].fileno()).st_size
    if size > max_bytes:
        return False  # the streaming reader says so
    if workers is not None and workers >= 2:
        return hasattr(os, "fork")
    return parallel_possible(size)
