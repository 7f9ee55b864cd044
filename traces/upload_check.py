"""The check an upload gets in its request: the whole file, streamed, but nothing built.

The worker reads the trace fully anyway (traces.services.analyse), so the request only has
to make sure that the file is a trace, with the engine's own messages: it opens it with the
engine's guard (a gzip bomb or a truncated gzip stream is stopped there), and runs the
engine's streaming scanner of Chrome / Kineto JSON over the whole event array with a decoder
that checks each event is well-formed JSON and an object, without building it. Chakra
files, which are small, are read whole by the engine. What the scan cannot see (an event
the reader refuses, such as one with a negative duration) fails the analysis with its reason.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import BinaryIO

import msgspec

from traces.atrace.io.chakra_et import looks_like_chakra_et, read_chakra_et
from traces.atrace.io.chakra_json import read_chakra
from traces.atrace.io.jsonstream import ChromeEventStream
from traces.atrace.io.opening import Peeked, open_trace_stream, sniff_format

HEAD_BYTES = 1 << 16
KINETO_KEYS = ("schemaVersion", "distributedInfo", "deviceProperties")


class _AnyEvent(msgspec.Struct, gc=False):
    """An event object; its fields are skipped (their JSON is still checked)."""


_CHECK_EVENTS = msgspec.json.Decoder(list[_AnyEvent]).decode


@dataclass
class CheckedTrace:
    """What the check learned: the format and the trace's top-level metadata."""

    format: str  # "kineto", "chrome", "chakra" or "chakra-et"
    meta: dict = field(default_factory=dict)
    events: int = 0  # events seen by the scan (-1: the trace was read whole)


def check_trace(source: BinaryIO) -> CheckedTrace:
    """Scan a trace from a binary stream; raises the engine's TraceError if it is not one."""
    stream, where, closers = open_trace_stream(source)
    try:
        head = stream.read(HEAD_BYTES)
        fmt = sniff_format(head)
        full = Peeked(head, stream)
        if looks_like_chakra_et(head, where) or fmt == "chakra":
            return _read_whole(full, where, "chakra-et" if fmt != "chakra" else "chakra")
        events = ChromeEventStream(full, where, decode=_CHECK_EVENTS)
        count = sum(len(batch) for batch, _first in events.batches())
        meta = events.meta
        if any(key in meta for key in KINETO_KEYS):
            fmt = "kineto"
        return CheckedTrace(format=fmt, meta=meta, events=count)
    finally:
        for c in reversed(closers):
            c.close()


def _read_whole(stream: BinaryIO, where: str, fmt: str) -> CheckedTrace:
    trace = read_chakra(stream, where) if fmt == "chakra" else read_chakra_et(stream, where)
    return CheckedTrace(format=str(trace.meta.get("source") or fmt), meta=dict(trace.meta), events=-1)
