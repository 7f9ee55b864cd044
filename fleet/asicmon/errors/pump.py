"""Following the kernel log beside the poll: `KernelLogPump`.

The log is read and parsed in a child process (a flood of a million lines costs that process
its core, not the poll its time), which sends what it merged every ``flush_s`` over a pipe;
a thread of the parent routes the events to the devices' channels, where the next poll
drains them. With ``in_process=True`` the reading runs on a thread instead (tests, and
machines where a child process is not wanted).
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import threading
import time
from dataclasses import dataclass

from fleet.asicmon.errors.events import DEFAULT_BUCKET_S
from fleet.asicmon.errors.kernel_log import KernelLogReader
from fleet.asicmon.errors.sources import ErrorRouter, KernelLog, boot_time

__all__ = ["KernelLogPump", "PumpStats"]

log = logging.getLogger(__name__)

CHUNK_LINES = 20_000
NICE = 10  # the child's scheduling priority, below the poll's
# The share of a core the child may take while it catches up with a flood: after each chunk
# it sleeps as long as the chunk took, times (1 / DUTY - 1). The poll's own core is then free
# half the time even where nice alone does not keep the child off it (a loaded machine).
DUTY = 0.5


@dataclass
class PumpStats:
    lines: int = 0
    matched: int = 0
    malformed: int = 0
    lost: int = 0  # kmsg records overwritten before they were read
    events: int = 0  # merged events handed to the router


def follow(path: str, conn, bucket_s: float, flush_s: float, from_start: bool, stop=None, nice: int = 0,
           duty: float = 1.0) -> None:
    """Reads ``path`` until ``stop`` is set or the other end of ``conn`` goes away; sends
    (events, stats) every ``flush_s`` when there is something new. ``nice``: a child process
    lowers its own priority, so that a flood never takes a core the poll wants; ``duty``: the
    share of the time it may be busy reading (1: no pause)."""
    if nice:
        with contextlib.suppress(OSError):
            os.nice(nice)
    source = KernelLog(path, from_start=from_start)
    reader = KernelLogReader(boot_time=boot_time(), bucket_s=bucket_s)
    flushed = time.monotonic()
    try:
        while stop is None or not stop.is_set():
            busy = time.monotonic()
            try:
                lines = source.read(CHUNK_LINES)
            except OSError as exc:
                log.warning("cannot read %s: %s", path, exc)
                lines = []
                time.sleep(5.0)
            if lines:
                reader.feed(lines)
                if duty < 1.0:
                    time.sleep((time.monotonic() - busy) * (1.0 / duty - 1.0))
            if time.monotonic() - flushed >= flush_s:
                flushed = time.monotonic()
                events = reader.take()
                if events or lines:
                    conn.send((events, (reader.lines, reader.matched, reader.malformed, source.lost)))
            if not lines:
                time.sleep(min(0.1, flush_s))
    except (BrokenPipeError, EOFError, OSError):
        pass  # the parent is gone
    finally:
        source.close()


class KernelLogPump:
    """Follows a kernel log and routes its driver errors to the devices' channels."""

    def __init__(self, path: str, router: ErrorRouter, *, bucket_s: float = DEFAULT_BUCKET_S,
                 flush_s: float = 0.5, from_start: bool = False, in_process: bool = False,
                 duty: float = DUTY) -> None:
        self.path, self.router, self.duty = path, router, duty
        self.bucket_s, self.flush_s, self.from_start, self.in_process = bucket_s, flush_s, from_start, in_process
        self.stats = PumpStats()
        self._stop = threading.Event()
        self._child = None
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        ctx = multiprocessing.get_context("spawn")
        ours, theirs = ctx.Pipe(duplex=False) if not self.in_process else multiprocessing.Pipe(duplex=False)
        args = (self.path, theirs, self.bucket_s, self.flush_s, self.from_start)
        if self.in_process:
            reader = threading.Thread(target=follow, args=(*args, self._stop), daemon=True, name="kernel-log")
            self._threads.append(reader)
            reader.start()
        else:
            self._child = ctx.Process(target=follow, args=(*args, None, NICE, self.duty), daemon=True,
                                      name="asicmon-kernel-log")
            self._child.start()
            theirs.close()
        receiver = threading.Thread(target=self._receive, args=(ours,), daemon=True, name="kernel-log-route")
        self._threads.append(receiver)
        receiver.start()

    def _receive(self, conn) -> None:
        while not self._stop.is_set():
            try:
                if not conn.poll(0.2):
                    continue
                events, (lines, matched, malformed, lost) = conn.recv()
            except (EOFError, OSError):
                return
            self.router.route(events)
            s = self.stats
            s.lines, s.matched, s.malformed, s.lost, s.events = lines, matched, malformed, lost, s.events + len(events)

    def stop(self) -> None:
        self._stop.set()
        if self._child is not None:
            self._child.terminate()
            self._child.join(timeout=5)
        for thread in self._threads:
            thread.join(timeout=2)
