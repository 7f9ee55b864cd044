"""Reading a large plain Chrome / Kineto JSON file on two cores.

The streaming reader (:func:`.chrome_reader.read_chrome`) cuts the event array into batches
of about 2 MB: after each chunk read, at the last ``},`` followed by ``{``. Here the same
cuts are found without decoding anything, by reading only the bytes around each cut
(:func:`plan`). This process and a forked child then each take the next batch not yet
taken whenever they are free (so the split follows what the batches cost on each side,
whatever the events look like; this process also merges, so the child takes more); the
child sends each batch as soon as it is decoded, and this process merges them all in file
order, then reads the end of the file (where the array closes and the other top-level keys
follow) with the streaming reader itself. Batches being the same and merged in the same
order, the trace is identical to the streaming reader's.

A cut that the streaming reader would have rejected (its decode fails: ``},{`` inside a
string, or the array's end inside the batch) or a malformed event shows up as a batch that
does not decode; then the file is read again by the streaming reader, which gives its usual
answer or error. Only the parent's memory holds the trace; the child holds one batch at a
time, and the batches it decoded ahead of the one this process merges wait in files that
have no name (none can outlive the two processes).
"""

from __future__ import annotations

import contextlib
import mmap
import multiprocessing
import os
import pickle
import select
import signal
import socket
import struct
import tempfile
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
_LOCK_WAIT_S = 10.0  # a side that cannot take a batch for this long gives up (the other died)


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
    except (msgspec.DecodeError, UnicodeDecodeError):  # the streaming reader words it
        raise _Fallback from None


def _batches(f, layout: Plan, stream: ChromeEventStream) -> Iterator[tuple[Batch, int]]:
    """Every batch in file order with its first ordinal: each decoded by whichever side took
    it, then the streaming reader's for the end of the file."""
    fd = f.fileno()
    claims = _Claims()
    child = _Child(fd, layout.batches, claims)
    mine: dict[int, Batch] = {}  # decoded here ahead of a batch the child still has
    ordinal = 0
    try:
        for k in range(len(layout.batches)):
            while k not in mine and not child.has(k):
                taken = claims.take(len(layout.batches))
                if taken is None:
                    break  # every batch is taken: the child has this one
                mine[taken] = _decode(fd, *layout.batches[taken])
            batch = mine.pop(k) if k in mine else child.batch(k)
            yield batch, ordinal
            ordinal += len(batch)
    finally:
        child.close()
    f.seek(layout.read_to)
    stream.events_seen = ordinal
    pending = os.pread(fd, layout.read_to - layout.rest, layout.rest)
    yield from stream.batches(resume=(layout.prefix, pending, layout.rest, layout.depth))


class _Claims:
    """The next batch no side has taken, in memory shared with the forked child: each side
    takes the next one when it is free, so the split follows what the batches cost on each
    side (the parent also merges), whatever the events look like."""

    def __init__(self):
        self._shared = mmap.mmap(-1, 8)  # anonymous and shared: the child sees the same
        self._lock = multiprocessing.Lock()

    def take(self, count: int) -> int | None:
        if not self._lock.acquire(timeout=_LOCK_WAIT_S):
            raise _Fallback  # the other side died holding it
        try:
            k = struct.unpack_from("<q", self._shared)[0]
            if k >= count:
                return None
            struct.pack_into("<q", self._shared, 0, k + 1)
            return k
        finally:
            self._lock.release()


class _Child:
    """A forked process that takes batches from ``claims`` until none is left, and hands
    each over as soon as it is decoded: the pickled batch in a file with no name (in memory
    where the system has /dev/shm), passed with its index and size over a socket. A file
    with no name is gone once read, and cannot outlive the two processes however they end.
    This process looks at the socket when it wants a batch, so the child never waits for it."""

    def __init__(self, fd: int, batches: list[tuple[int, int]], claims: _Claims):
        shm = Path("/dev/shm")
        folder = shm if shm.is_dir() else None
        here, there = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.pid = os.fork()
        if self.pid == 0:  # the child
            here.close()
            status = 0
            try:
                while (k := claims.take(len(batches))) is not None:
                    data = pickle.dumps(_decode(fd, *batches[k]), protocol=pickle.HIGHEST_PROTOCOL)
                    with tempfile.TemporaryFile(dir=folder) as file:
                        file.write(data)
                        file.flush()
                        socket.send_fds(there, [struct.pack("<qq", k, len(data))], [file.fileno()])
            except BaseException:  # noqa: BLE001 - the parent reads it again alone
                status = 1
            finally:
                os._exit(status)
        there.close()
        here.setblocking(False)
        self.socket = here
        self._ready: dict[int, tuple[int, int]] = {}  # index -> (file, size), not yet read
        self._ended = False

    def has(self, k: int) -> bool:
        self._drain()
        return k in self._ready

    def batch(self, k: int) -> Batch:
        """Batch ``k``, which the child took: waits for it; _Fallback if it never comes."""
        while k not in self._ready and not self._ended:
            select.select([self.socket], [], [])
            self._drain()
        if k not in self._ready:
            raise _Fallback  # it failed (or died): no more batches
        file, size = self._ready.pop(k)
        try:
            data = os.pread(file, size, 0)
        finally:
            os.close(file)
        if len(data) != size:
            raise _Fallback
        return pickle.loads(data)

    def _drain(self) -> None:
        """Takes the batches handed over so far, without waiting."""
        while not self._ended:
            try:
                head, files, _flags, _addr = socket.recv_fds(self.socket, 16, 1)
            except BlockingIOError:
                return
            if not head or len(files) != 1:  # the child is gone (or this process is out of
                for file in files:  # file descriptors): nothing more will come
                    os.close(file)
                self._ended = True
                return
            k, size = struct.unpack("<qq", head)
            self._ready[k] = (files[0], size)

    def close(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)
        os.waitpid(self.pid, 0)
        self._drain()  # files handed over but not read: closed below
        for file, _size in self._ready.values():
            os.close(file)
        self.socket.close()
