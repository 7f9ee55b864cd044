"""Streaming reader for the ``traceEvents`` array of Chrome trace JSON.

A trace of a gigabyte must not be parsed into a gigabyte of Python objects at once. This
reader scans the file a chunk at a time: numpy finds quotes and brackets, a cumulative sum
tells which of them lie outside strings and at what depth, and so where each event object of
the array starts and ends. Each run of complete events is then decoded as one small array
(by msgspec into typed records, or by orjson into dicts) and handed to the caller, who
keeps columns and drops the records.

The other top-level keys (``distributedInfo``, ``deviceProperties``, ``displayTimeUnit``...)
are collected and parsed at the end into :attr:`ChromeEventStream.meta`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import BinaryIO

import msgspec
import numpy as np
import orjson

from ...errors import TraceFormatError

CHUNK_SIZE = 2 << 20
_AT_INDEX = re.compile(r"at `\$\[(\d+)\]([^`]*)`")
_AT_BYTE = re.compile(r"\(byte (\d+)\)")
_WS = b" \t\r\n"

_INTERESTING = np.zeros(256, bool)
for _c in b'"{}[]':
    _INTERESTING[_c] = True
_DELTA = np.zeros(256, np.int64)
_DELTA[ord("{")] = _DELTA[ord("[")] = 1
_DELTA[ord("}")] = _DELTA[ord("]")] = -1


def _structure(data: bytes, depth0: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Positions of brackets outside strings, the byte at each, and the depth after it."""
    arr = np.frombuffer(data, np.uint8)
    mask = _INTERESTING[arr]
    backslashes = np.flatnonzero(arr == 92)
    if len(backslashes):
        # A quote is escaped when it follows an odd-length run of backslashes.
        run_start = np.ones(len(backslashes), bool)
        run_start[1:] = np.diff(backslashes) != 1
        starts = backslashes[run_start]
        lengths = np.diff(np.append(np.flatnonzero(run_start), len(backslashes)))
        after = starts + lengths
        escaped = after[(lengths % 2 == 1) & (after < len(arr))]
        mask[escaped] = False
    pos = np.flatnonzero(mask)
    chars = arr[pos]
    quote = chars == 34
    quotes_before = np.cumsum(quote) - quote
    structural = ~quote & (quotes_before % 2 == 0)
    pos = pos[structural]
    chars = chars[structural]
    depth = depth0 + np.cumsum(_DELTA[chars])
    return pos, chars, depth


def _last_object_boundary(data: bytes, tries: int = 64) -> int:
    """Position of the last '}' that is followed by ',' and the '{' of another object
    (whitespace allowed around the comma); -1 if none among the last ``tries`` '},'."""
    cut = len(data)
    for _ in range(tries):
        cut = data.rfind(b"},", 0, cut)
        if cut < 0:
            return -1
        nxt = data[cut + 2 : cut + 66].lstrip(_WS)
        if nxt[:1] == b"{":
            return cut
    return -1


_SEPARATORS = re.compile(rb"[ \t\r\n,]*")


def fast_cut(pending: bytes) -> tuple[int, int] | None:
    """Where the fast path would cut ``pending``: (first byte of its first event, the
    closing brace of the last event followed by another), or None if it would not."""
    cut = _last_object_boundary(pending)
    if cut < 0:
        return None
    lead = _SEPARATORS.match(pending).end()
    if lead > cut or pending[lead : lead + 1] != b"{":
        return None
    return lead, cut


class ChromeEventStream:
    """Iterate over batches of event dicts from a Chrome trace JSON byte stream."""

    def __init__(
        self,
        stream: BinaryIO,
        where: str = "trace",
        chunk_size: int = CHUNK_SIZE,
        decode: Callable[[bytes], list] | None = None,
    ):
        self.decode = decode or orjson.loads
        self.stream = stream
        self.where = where
        self.chunk_size = chunk_size
        self.meta: dict = {}
        self.events_seen = 0
        self.fast_failures = 0

    def _error(self, what: str, offset: int | None = None) -> TraceFormatError:
        where = self.where if offset is None else f"{self.where}, byte {offset}"
        return TraceFormatError(what, where)

    def _read(self) -> bytes:
        return self.stream.read(self.chunk_size)

    def batches(self, resume: tuple[bytes, bytes, int, int] | None = None) -> Iterator[tuple[list[dict], int]]:
        """Yield (events, ordinal of the first) for each run of complete events.

        ``resume`` continues a stream whose beginning was cut into batches elsewhere
        (:mod:`.chrome_parallel`): (bytes up to the array's opening bracket, the pending
        bytes, their offset, the array's depth), the stream positioned after them and
        :attr:`events_seen` set.
        """
        prefix, pending, offset, array_depth = resume or self._prelude()
        eof = False
        while True:
            pending, eof = self._fill(pending, eof)
            if not pending:
                if eof:
                    break
                continue
            batch = self._fast_batch(pending) if not eof and self.fast_failures < 3 else None
            if batch is None:
                batch, closed_at = self._exact_batch(pending, offset, array_depth, eof)
            else:
                closed_at = None
            events, cut = batch
            if events:
                ordinal = self.events_seen
                self.events_seen += len(events)
                yield events, ordinal
            if closed_at is not None:
                self._finish(prefix, pending[cut + 1 :] + self._read_all(), closed_at, array_depth)
                return
            offset += cut
            pending = pending[cut:]
            if eof and self._at_end(pending, offset, array_depth):
                return
        self._at_end(b"", offset, array_depth)  # the input ended right after a separator

    def _fill(self, pending: bytes, eof: bool) -> tuple[bytes, bool]:
        """Append the next chunk (if any is left) to the pending bytes."""
        if eof:
            return pending, eof
        chunk = self._read()
        if not chunk:
            return pending, True
        return (pending + chunk if pending else chunk), False

    def _exact_batch(self, pending: bytes, offset: int, array_depth: int, eof: bool):
        """Decode the complete events at the head of ``pending`` by scanning its structure.

        Returns ((events, cut), closed_at): ``cut`` is where the undecoded rest begins (for a
        closed array: the closing bracket), ``closed_at`` the file offset of the bracket that
        closes the event array, or None if it is not in ``pending``.
        """
        pos, chars, depth = _structure(pending, array_depth)
        starts = pos[(chars == ord("{")) & (depth == array_depth + 1)]
        ends = pos[(chars == ord("}")) & (depth == array_depth)]
        closes = pos[depth < array_depth]
        bad_nest = pos[(chars == ord("[")) & (depth == array_depth + 1)]
        limit = int(closes[0]) if len(closes) else len(pending)
        if len(bad_nest) and bad_nest[0] < limit:
            raise self._error("traceEvents holds an array where an event object was expected", offset + int(bad_nest[0]))
        ends = ends[ends < limit]
        events: list = []
        if len(ends):
            events = self._decode_run(pending, int(starts[0]), int(ends[-1]), offset)
            cut = int(ends[-1]) + 1
        else:
            cut = 0
            if not len(starts) or starts[0] >= limit:
                # No event begins before the limit: only separators may be there.
                if pending[:limit].strip(_WS + b","):
                    raise self._error("traceEvents holds a value that is not an event object", offset)
                cut = limit
        gap = pending[cut:limit].strip(_WS + b",")
        if len(closes):
            if gap:
                raise self._error("unexpected content in traceEvents", offset + cut)
            return (events, limit), offset + limit
        if gap and gap[:1] != b"{":
            raise self._error("unexpected content in traceEvents", offset + cut)
        return (events, cut), None

    def _decode_run(self, pending: bytes, first: int, last: int, offset: int) -> list:
        try:
            return self.decode(b"[" + pending[first : last + 1] + b"]")
        except orjson.JSONDecodeError as exc:
            raise self._error(f"malformed event JSON ({exc.msg})", offset + first + max(exc.pos - 1, 0)) from None
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise self._decode_error(exc, offset + first) from None
        except UnicodeDecodeError as exc:  # a string field msgspec decodes is not UTF-8
            try:
                pending[first : last + 1].decode()
                at = 0
            except UnicodeDecodeError as first_bad:
                at = first_bad.start
            raise self._error(f"event text that is not UTF-8 ({exc.reason})", offset + first + at) from None

    def _at_end(self, pending: bytes, offset: int, array_depth: int) -> bool:
        """At the end of the input with the array still open: True for a bare array (Chrome
        allows the closing bracket to be missing), else an error."""
        if pending.strip(_WS):
            raise self._error("truncated JSON: the last event is incomplete", offset)
        if array_depth == 1:
            return True
        raise self._error("truncated JSON: the traceEvents array is not closed", offset)

    def _finish(self, prefix: bytes, suffix: bytes, closed_at: int, array_depth: int) -> None:
        """Check what follows the event array and parse the other top-level keys."""
        if array_depth == 1:
            if suffix.strip(_WS):
                raise self._error("unexpected content after the event array", closed_at + 1)
            return
        try:
            meta = orjson.loads(prefix + b"]" + suffix)
        except orjson.JSONDecodeError as exc:
            raise self._error(f"truncated or malformed JSON after traceEvents ({exc.msg})", closed_at) from None
        meta.pop("traceEvents", None)
        self.meta = meta

    def _fast_batch(self, pending: bytes) -> tuple[list, int] | None:
        """Cut after the last '},' and decode; None if that was not an event boundary.

        The cut is the last '},' followed by the '{' of another object (kernel names such as
        ``{lambda(float)#1}, at::...`` hold '},' inside strings). A cut inside a string or a
        nested object leaves unbalanced JSON, which the decoder rejects, so a successful
        decode proves the cut; otherwise the exact scan runs.
        """
        found = fast_cut(pending)
        if found is None:
            return None
        lead, cut = found
        try:
            events = self.decode(b"".join((b"[", memoryview(pending)[lead : cut + 1], b"]")))
        except (orjson.JSONDecodeError, msgspec.DecodeError, UnicodeDecodeError):
            self.fast_failures += 1
            return None
        return events, cut + 2

    def _decode_error(self, exc: Exception, base: int) -> TraceFormatError:
        text = str(exc)
        at = _AT_INDEX.search(text)
        if at:
            k = int(at.group(1))
            what = text.split(" - at ")[0]
            field = at.group(2) or ""
            return TraceFormatError(
                f"{what}{' in ' + repr(field.lstrip('.')) if field else ''}",
                f"{self.where}, traceEvents[{self.events_seen + k}]",
            )
        pos = _AT_BYTE.search(text)
        offset = base + max(int(pos.group(1)) - 1, 0) if pos else base
        return self._error(f"malformed event JSON ({text.split(' (byte')[0]})", offset)

    def _read_all(self) -> bytes:
        parts = []
        while chunk := self._read():
            parts.append(chunk)
        return b"".join(parts)

    def _prelude(self) -> tuple[bytes, bytes, int, int]:
        """Read up to the opening bracket of the event array.

        Returns (bytes up to and including that bracket, the bytes after it, their file
        offset, the bracket depth of the array's elements).
        """
        data = b""
        while True:
            chunk = self._read()
            if not chunk:
                break
            data += chunk
            head = data.lstrip(_WS)
            if head[:3] == b"\xef\xbb\xbf":
                head = head[3:].lstrip(_WS)
                data = head
            if not head:
                continue
            first = head[:1]
            if first == b"[":
                at = data.index(b"[")
                return data[: at + 1], data[at + 1 :], at + 1, 1
            if first != b"{":
                raise self._error("not JSON: a trace must start with '{' or '['", len(data) - len(head))
            found = self._find_events_key(data) or self._scan_for_events_key(data)
            if found is not None:
                return found
        if not data.strip(_WS):
            raise self._error("the file is empty")
        raise self._error("truncated JSON: no traceEvents array found", len(data))

    def _scan_for_events_key(self, data: bytes) -> tuple[bytes, bytes, int, int] | None:
        """Slow path: the bracket of the top-level ``traceEvents`` key by a structure scan of
        everything read so far; None if more must be read."""
        pos, chars, depth = _structure(data, 0)
        opens = pos[(chars == ord("[")) & (depth == 2)]
        for at in opens.tolist():
            if self._key_before(data, at) == b"traceEvents":
                return data[: at + 1], data[at + 1 :], at + 1, 2
        if len(pos) and (depth <= 0).any():
            raise self._error("the JSON object has no traceEvents array (not a Chrome trace)")
        if len(data) > (256 << 20):
            raise self._error("no traceEvents array in the first 256 MB")
        return None

    @staticmethod
    def _find_events_key(data: bytes) -> tuple[bytes, bytes, int, int] | None:
        """Fast path: the bracket after a top-level ``"traceEvents":``, checking the
        structure of the bytes before it only (not the whole first chunk)."""
        key_at = data.find(b'"traceEvents"')
        while key_at >= 0:
            colon = data.find(b":", key_at + 13)
            if colon < 0:
                return None
            rest = data[colon + 1 :].lstrip(_WS)
            at = len(data) - len(rest)
            if rest[:1] == b"[":
                pos, chars, depth = _structure(data[: at + 1], 0)
                if len(pos) and pos[-1] == at and depth[-1] == 2:
                    return data[: at + 1], data[at + 1 :], at + 1, 2
            key_at = data.find(b'"traceEvents"', key_at + 1)
        return None

    @staticmethod
    def _key_before(data: bytes, at: int) -> bytes:
        colon = data.rfind(b":", 0, at)
        end_q = data.rfind(b'"', 0, colon)
        start_q = data.rfind(b'"', 0, end_q)
        if colon < 0 or start_q < 0 or data[colon + 1 : at].strip(_WS):
            return b""
        return data[start_q + 1 : end_q]
