"""Reading a large plain Chrome / Kineto JSON file on two cores.

The streaming reader (:func:`.chrome_reader.read_chrome`) cuts the event array into batches
of about 2 MB: after each chunk read, at the last ``},`` followed by ``{``. Here the same
cuts are found without decoding anything, by reading only the bytes around each cut
(:func:`plan`). A forked child then decodes the later batches while this process decodes
the earlier ones and merges them; then it merges the child's, in file order, and reads the
end of the file (where the array closes and the other top-level keys follow) with the
streaming reader itself. Batches being the same and merged in the same order, the trace is
identical to the streaming reader's.

A cut that the streaming reader would have rejected (its decode fails: ``},{`` inside a
string, or the array's end inside the batch) or a malformed event shows up as a batch that
does not decode; then the file is read again by the streaming reader, which gives its usual
answer or error. Only the parent's memory holds the trace; the child holds its decoded
batches until it hands them over, one at a time, through a pipe.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import signal
import struct
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import msgspec

from ...model.trace import Trace
from .batch import Batch, parse_batch
from .jsonstream import CHUNK_SIZE, ChromeEventStream, _last_object_boundary, fast_cut
from .reader import merge_batches, read_chrome

#: Files smaller than this are read by one process (a fork costs more than it saves).
MIN_PARALLEL_BYTES = 64 << 20
_WINDOW = 1 << 16  # bytes read around each cut
_CHILD_SHARE = 0.55  # of the batches' bytes: the child has no merging to do


class _Fallback(Exception):
    """A batch did not decode: read the file again with the streaming reader."""


@dataclass
class Plan:
    """Batches of the event array, as the streaming reader would cut them, up to where
    the end of the file is near; then the state to resume streaming from."""

    prefix: bytes  # the text up to and including the array's opening bracket
    depth: int  # bracket depth of the array's elements
    batches: list[tuple[int, int]]  # [start, end) of each batch's events
    rest: int  # offset of the first byte not in a batch
    read_to: int  # the streaming reader would have read the file up to here


def parallel_possible(size: int) -> bool:
    """Whether a file of ``size`` bytes is worth two processes here: a fork is available
    and safe (this process runs one thread), and two cores are free to use."""
    if not hasattr(os, "fork") or threading.active_count() != 1:
        return False
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return cores >= 2 and size >= MIN_PARALLEL_BYTES


def read_chrome_file(path: str | os.PathLike, where: str, *, chunk_size: int | None = None) -> Trace:
    """Read a plain (not compressed) Chrome / Kineto JSON file with two processes."""
    chunk = chunk_size or CHUNK_SIZE
    with Path(path).open("rb") as f:
        layout = plan(f, chunk)
        if layout is None or len(layout.batches) < 2:
            f.seek(0)
            return read_chrome(f, where, chunk_size=chunk_size)
        try:
            stream = ChromeEventStream(f, where, chunk_size=chunk, decode=parse_batch)
            # Closed on any way out: a batch refused while merging stops the child at once.
            with contextlib.closing(_batches(f, layout, stream)) as batches:
                return merge_batches(batches, lambda: stream.meta, where)
        except _Fallback:
            f.seek(0)
            return read_chrome(f, where, chunk_size=chunk_size)


def plan(f, chunk: int) -> Plan | None:
    """Cut the event array of the file ``f`` as the streaming reader would (None: it is
    not a Chrome trace's object or array, which the streaming reader will say)."""
    size = os.fstat(f.fileno()).st_size
    try:
        prefix, pending, start, depth = ChromeEventStream(f, chunk_size=chunk)._prelude()
    except Exception:  # noqa: BLE001 - the streaming reader reports it
        return None
    end = start + len(pending)
    batches = []
    while end + chunk < size:  # the next read does not reach the end of the file
        found = _cut(f.fileno(), start, end + chunk)
        if found is None:
            break
        lead, cut = found
        batches.append((lead, cut + 1))
        start, end = cut + 2, end + chunk
    return Plan(prefix, depth, batches, start, end)


def _cut(fd: int, start: int, end: int) -> tuple[int, int] | None:
    """:func:`fast_cut` of the file's bytes [start, end), reading only around the cut."""
    if end - start <= 2 * _WINDOW:
        found = fast_cut(os.pread(fd, end - start, start))
        return None if found is None else (start + found[0], start + found[1])
    tail = os.pread(fd, _WINDOW, end - _WINDOW)
    cut = _last_object_boundary(tail)
    head = os.pread(fd, 4096, start)
    lead = len(head) - len(head.lstrip(b" \t\r\n,"))
    if cut < 0 or lead == len(head):  # the cut (or the first event) is further in
        found = fast_cut(os.pread(fd, end - start, start))
        return None if found is None else (start + found[0], start + found[1])
    if head[lead : lead + 1] != b"{" or start + lead > end - _WINDOW + cut:
        return None
    return start + lead, end - _WINDOW + cut


def _decode(fd: int, start: int, end: int) -> Batch:
    """The batch of the file's bytes [start, end), read straight into a bracketed buffer."""
    buf = bytearray(end - start + 2)
    buf[0], buf[-1] = ord("["), ord("]")
    view = memoryview(buf)[1:-1]
    done = 0
    while done < len(view):
        n = os.preadv(fd, [view[done:]], start + done)
        if n <= 0:
            raise _Fallback
        done += n
    del view
    try:
        return parse_batch(buf)
    except (msgspec.DecodeError, msgspec.ValidationError):
        raise _Fallback from None


def _batches(f, layout: Plan, stream: ChromeEventStream) -> Iterator[tuple[Batch, int]]:
    """Every batch in file order with its first ordinal: the parent's, the child's, then
    the streaming reader's for the end of the file."""
    fd = f.fileno()
    sizes = [end - start for start, end in layout.batches]
    total, acc, split = sum(sizes), 0, len(sizes)
    for k, n in enumerate(sizes):  # the child takes the last part, about _CHILD_SHARE
        if acc >= total * (1 - _CHILD_SHARE):
            split = k
            break
        acc += n
    child = _Child(fd, layout.batches[split:])
    ordinal = 0
    try:
        for start, end in layout.batches[:split]:
            batch = _decode(fd, start, end)
            yield batch, ordinal
            ordinal += len(batch)
        for batch in child.results():
            yield batch, ordinal
            ordinal += len(batch)
    finally:
        child.close()
    f.seek(layout.read_to)
    stream.events_seen = ordinal
    pending = os.pread(fd, layout.read_to - layout.rest, layout.rest)
    yield from stream.batches(resume=(layout.prefix, pending, layout.rest, layout.depth))


class _Child:
    """A forked process that decodes the given batches, then sends them (pickled, one
    message each, or a failure) through a pipe."""

    def __init__(self, fd: int, batches: list[tuple[int, int]]):
        read_end, write_end = os.pipe()
        self.pid = os.fork()
        if self.pid == 0:  # the child
            os.close(read_end)
            status = 0
            try:
                results = [_decode(fd, start, end) for start, end in batches]
                with os.fdopen(write_end, "wb") as out:
                    for k in range(len(results)):
                        data = pickle.dumps(results[k], protocol=pickle.HIGHEST_PROTOCOL)
                        results[k] = None
                        out.write(struct.pack("<q", len(data)))
                        out.write(data)
            except BaseException:  # noqa: BLE001 - the parent reads it again alone
                status = 1
            finally:
                os._exit(status)
        os.close(write_end)
        self.count = len(batches)
        self.pipe = os.fdopen(read_end, "rb")

    def results(self) -> Iterator[Batch]:
        for _ in range(self.count):
            head = self.pipe.read(8)
            if len(head) < 8:
                raise _Fallback  # it failed (or died): no more batches
            data = self.pipe.read(struct.unpack("<q", head)[0])
            yield pickle.loads(data)

    def close(self) -> None:
        self.pipe.close()
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)
        os.waitpid(self.pid, 0)
