"""The look an upload gets in its request: its first bytes only, never the whole file.

The web process must not parse what a client sends (a gzip may expand to gigabytes), so the
request opens the file with the engine's guard and reads its first :data:`HEAD_BYTES`
(decompressed): an empty file, a broken gzip start, or bytes that are neither JSON nor a
Chakra ET are refused with the engine's words; the trace's top-level metadata written before
its events (Kineto writes ``schemaVersion``, ``distributedInfo``, ... first) is read from
that head. A file whose whole text fits in the head is checked whole by the engine's scan
(that costs no more than the head). Everything else is read by the trace worker
(traces.writers.analyse), under TRACE_PARSE_MAX_MB, and a file it cannot read fails its
trace with the engine's message.
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from typing import BinaryIO

import msgspec
import orjson

from traces.atrace.errors import TraceFormatError
from traces.atrace.io.chakra.et import looks_like_chakra_et, read_chakra_et
from traces.atrace.io.chakra.json_reader import read_chakra
from traces.atrace.io.chrome.jsonstream import ChromeEventStream
from traces.atrace.io.opening import open_trace_stream, sniff_format

HEAD_BYTES = 1 << 16
KINETO_KEYS = ("schemaVersion", "distributedInfo", "deviceProperties")
_BOM = b"\xef\xbb\xbf"


class _AnyEvent(msgspec.Struct, gc=False):
    """An event object; its fields are skipped (their JSON is still checked)."""


_CHECK_EVENTS = msgspec.json.Decoder(list[_AnyEvent]).decode


@dataclass
class CheckedTrace:
    """What the look learned: the format and the trace's top-level metadata."""

    format: str  # "kineto", "chrome", "chakra" or "chakra-et"
    meta: dict = field(default_factory=dict)
    events: int = 0  # events seen (-1: read whole as Chakra; None: only the head was read)
    whole: bool = True  # the whole file was checked (it fit in the head)


def check_trace(source: BinaryIO) -> CheckedTrace:
    """Look at a trace's first bytes; raises the engine's TraceError if they are not a trace's."""
    stream, where, closers = open_trace_stream(source)
    try:
        head = stream.read(HEAD_BYTES)
        whole = len(head) < HEAD_BYTES or not stream.read(1)
    finally:
        for c in reversed(closers):
            c.close()
    return check_head(head, where, whole=whole)


def check_head(head: bytes, where: str, *, whole: bool) -> CheckedTrace:
    text = head.lstrip()
    if text.startswith(_BOM):
        text = text[len(_BOM):].lstrip()
    if not text:
        raise TraceFormatError("the file is empty", where)
    fmt = sniff_format(head)
    if looks_like_chakra_et(head, where):
        return _read_whole(head, where, "chakra-et") if whole else CheckedTrace("chakra-et", whole=False, events=None)
    if text[:1] not in (b"{", b"["):
        raise TraceFormatError("not JSON: a trace must start with '{' or '[' (or be a Chakra ET)", where)
    if fmt == "chakra":
        return _read_whole(head, where, "chakra") if whole else CheckedTrace("chakra", whole=False, events=None)
    if whole:
        return _scan(head, where, fmt)
    meta = head_meta(head)
    if any(key in meta for key in KINETO_KEYS):
        fmt = "kineto"
    return CheckedTrace(format=fmt, meta=meta, events=None, whole=False)


def head_meta(head: bytes) -> dict:
    """The top-level keys written before ``traceEvents`` (empty when there are none, or
    when the head ends before the event array starts)."""
    found = ChromeEventStream._find_events_key(head)
    if found is None:
        return {}
    prefix = found[0]
    before = prefix[: prefix.rfind(b'"traceEvents"')].rstrip().rstrip(b",")
    try:
        meta = orjson.loads(before + b"}")
    except orjson.JSONDecodeError:
        return {}
    return meta if isinstance(meta, dict) else {}


def _scan(text: bytes, where: str, fmt: str) -> CheckedTrace:
    events = ChromeEventStream(io.BytesIO(text), where, decode=_CHECK_EVENTS)
    count = sum(len(batch) for batch, _first in events.batches())
    if any(key in events.meta for key in KINETO_KEYS):
        fmt = "kineto"
    return CheckedTrace(format=fmt, meta=events.meta, events=count)


def _read_whole(text: bytes, where: str, fmt: str) -> CheckedTrace:
    trace = read_chakra(io.BytesIO(text), where) if fmt == "chakra" else read_chakra_et(io.BytesIO(text), where)
    return CheckedTrace(format=str(trace.meta.get("source") or fmt), meta=dict(trace.meta), events=-1)
