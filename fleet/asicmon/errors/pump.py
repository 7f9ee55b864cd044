"""Following the kernel log beside the poll: `KernelLogPump`.

The log is read and merged by a child process (`fleet.asicmon.errors.follower`), which steps
out of the poll's way (its own scheduling group at the lowest weight, the idle class) and
sends what it merged every ``flush_s`` over a pipe; a thread of the parent routes the events
to the devices' channels, where the next poll drains them. The poll never parses a line: a
flood costs it a handful of merged events.

A follower that dies is logged and started again where the last batch it sent left off
(the lines after are read again: none lost, none counted twice), after a pause that grows
while it keeps dying. With ``in_process=True`` the reading runs on a thread instead (tests,
and machines where a child process is not wanted).
"""

from __future__ import annotations

import logging
import multiprocessing
import threading
import time
from dataclasses import dataclass

from fleet.asicmon.errors.events import DEFAULT_BUCKET_S
from fleet.asicmon.errors.follower import NICE, Batch, follow
from fleet.asicmon.errors.sources import ErrorRouter

__all__ = ["DUTY", "NICE", "KernelLogPump", "PumpStats"]

log = logging.getLogger(__name__)

# The share of the time the follower may be busy while it catches up with a flood (the
# agent's AGENT_KERNEL_LOG_DUTY): after each chunk it sleeps as long as the chunk took, times
# (1 / DUTY - 1).
DUTY = 0.5
RESTART_PAUSE_S = (1.0, 60.0)  # the first pause before a restart, and the longest


@dataclass
class PumpStats:
    lines: int = 0
    matched: int = 0
    malformed: int = 0
    lost: int = 0  # kmsg records overwritten before they were read
    events: int = 0  # merged events handed to the router
    restarts: int = 0  # followers started again after they died
    position: int | None = None  # where the last batch left off in the log


class KernelLogPump:
    """Follows a kernel log and routes its driver errors to the devices' channels."""

    def __init__(self, path: str, router: ErrorRouter, *, bucket_s: float = DEFAULT_BUCKET_S,
                 flush_s: float = 0.5, from_start: bool = False, in_process: bool = False,
                 duty: float = DUTY, restart_pause_s: tuple[float, float] = RESTART_PAUSE_S,
                 resume: int | None = None, kmsg: bool | None = None) -> None:
        """``resume``: a position an earlier pump reached (`PumpStats.position`, e.g. kept
        across the agent's restarts): reading starts after it. ``kmsg``: the path holds
        /dev/kmsg records (default: it is /dev/kmsg)."""
        self.path, self.router, self.duty, self.kmsg = path, router, duty, kmsg
        self.bucket_s, self.flush_s, self.from_start, self.in_process = bucket_s, flush_s, from_start, in_process
        self.restart_pause_s = restart_pause_s
        self.stats = PumpStats(position=resume)
        self.child = None  # the follower's process (None: in process)
        self._base = PumpStats()  # counters of the followers before this one
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        conn = self._start_follower()
        supervisor = threading.Thread(target=self._supervise, args=(conn,), daemon=True, name="kernel-log-route")
        self._threads.append(supervisor)
        supervisor.start()

    def stop(self) -> None:
        self._stop.set()
        if self.child is not None:
            self.child.terminate()
            self.child.join(timeout=5)
        for thread in self._threads:
            thread.join(timeout=2)

    # -- internals ---------------------------------------------------------------------------
    def _start_follower(self):
        ctx = multiprocessing.get_context("spawn")
        ours, theirs = ctx.Pipe(duplex=False)
        resume = self.stats.position
        args = (self.path, theirs, self.bucket_s, self.flush_s, self.from_start, resume)
        if self.in_process:
            reader = threading.Thread(target=follow, args=(*args, self._stop), kwargs={"kmsg": self.kmsg}, daemon=True,
                                      name="kernel-log")
            self._threads.append(reader)
            reader.start()
        else:
            self.child = ctx.Process(target=follow, args=(*args, None, True, self.duty), kwargs={"kmsg": self.kmsg},
                                     daemon=True, name="asicmon-kernel-log")
            self.child.start()
            theirs.close()
        return ours

    def _supervise(self, conn) -> None:
        pause = self.restart_pause_s[0]
        while not self._stop.is_set():
            started = time.monotonic()
            self._receive(conn)
            conn.close()
            if self._stop.is_set() or self.child is None:
                return
            self.child.join(timeout=5)
            code = self.child.exitcode
            if time.monotonic() - started > 10 * self.restart_pause_s[1]:
                pause = self.restart_pause_s[0]  # it had run well for a while
            log.warning("the kernel-log follower of %s exited (exit code %s); restarting it in %.0f s from %s",
                        self.path, code, pause, "its start" if self.stats.position is None
                        else f"position {self.stats.position}")
            if self._stop.wait(pause):
                return
            pause = min(pause * 2, self.restart_pause_s[1])
            self._base = PumpStats(**vars(self.stats))
            self.stats.restarts += 1
            conn = self._start_follower()

    def _receive(self, conn) -> None:
        """Routes batches until the follower's end of the pipe closes (it died) or we stop."""
        while not self._stop.is_set():
            try:
                if not conn.poll(0.2):
                    continue
                batch: Batch = conn.recv()
            except (EOFError, OSError):
                return
            self.router.route(batch.events)
            s, b = self.stats, self._base
            s.lines, s.matched, s.malformed = b.lines + batch.lines, b.matched + batch.matched, b.malformed + batch.malformed
            s.lost, s.events, s.position = b.lost + batch.lost, s.events + len(batch.events), batch.position
