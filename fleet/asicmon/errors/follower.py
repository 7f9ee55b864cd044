"""The kernel-log follower: the child process of `KernelLogPump` that reads and merges.

It runs out of the poll's way. On Linux a process competes for the CPU as part of its
*autogroup* (its session) before its own priority counts: a follower in the agent's session
that takes a core during a flood takes it from the poll's share of the machine even at nice
19. So the follower starts a session of its own (a group of its own), gives that group the
lowest weight (``/proc/self/autogroup`` nice 19) and itself the idle scheduling class
(``SCHED_IDLE``: any other task that wants its CPU gets it at once). Where one of these is
not available it says so and falls back to plain nice. On top of that ``duty`` can limit the
share of the time it is busy while it catches up (1: no pause).

Every ``flush_s`` it sends what it merged with its counters and the log position those
cover: a follower restarted there (`KernelLogPump` restarts one that died) reads the lines
after it again, none twice and none lost.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from fleet.asicmon.errors.kernel_log import KernelLogReader
from fleet.asicmon.errors.sources import KernelLog, boot_time

__all__ = ["NICE", "Batch", "follow", "step_aside"]

log = logging.getLogger(__name__)

CHUNK_LINES = 20_000  # kmsg records read per chunk (a file is read 1 MiB at a time)
SLICE_LINES = 1_000  # lines merged between two pauses (a few milliseconds' work)
NICE = 10  # the fallback priority where the idle class cannot be had


@dataclass
class Batch:
    """What a follower sends its parent: merged events, counters since it started, and the
    log position they cover."""

    events: list = field(default_factory=list)
    lines: int = 0
    matched: int = 0
    malformed: int = 0
    lost: int = 0
    position: int = 0


def step_aside(nice: int = NICE) -> list[str]:
    """Puts this process below every other on the machine as far as an unprivileged process
    can; what it did, in words."""
    done = []
    try:
        os.setsid()
        done.append("own session")
    except OSError:
        pass
    try:
        Path("/proc/self/autogroup").write_text("19")
        done.append("autogroup nice 19")
    except OSError:
        pass
    try:
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
        done.append("SCHED_IDLE")
    except (AttributeError, OSError):
        with contextlib.suppress(OSError):
            os.nice(nice)
            done.append(f"nice {nice}")
    return done


def follow(path: str, conn, bucket_s: float, flush_s: float, from_start: bool, resume: int | None = None,
           stop=None, aside: bool = False, duty: float = 1.0, kmsg: bool | None = None) -> None:
    """Reads ``path`` until ``stop`` is set, the parent goes away or the other end of
    ``conn`` closes; sends a `Batch` every ``flush_s`` when there is something new.
    ``resume``: a position a previous follower sent. ``aside``: `step_aside` first (a child
    process; a thread leaves its process's priority alone)."""
    if aside:
        log.info("kernel-log follower %d: %s", os.getpid(), ", ".join(step_aside()) or "normal priority")
    parent = os.getppid()
    source = KernelLog(path, from_start=from_start, resume=resume, kmsg=kmsg)
    reader = KernelLogReader(boot_time=boot_time(), bucket_s=bucket_s)
    flushed, sent = time.monotonic(), None
    try:
        while (stop is None or not stop.is_set()) and (stop is not None or os.getppid() == parent):
            try:
                lines = source.read(CHUNK_LINES)
            except OSError as exc:
                log.warning("cannot read %s: %s", path, exc)
                lines = []
                time.sleep(5.0)
            for at in range(0, len(lines), SLICE_LINES):  # short bursts: the poll never waits long behind one
                busy = time.monotonic()
                reader.feed(lines[at:at + SLICE_LINES])
                if duty < 1.0:
                    time.sleep((time.monotonic() - busy) * (1.0 / duty - 1.0))
            if time.monotonic() - flushed >= flush_s:
                flushed = time.monotonic()
                state = (reader.lines, reader.malformed, source.lost, source.position)
                if state != sent:
                    sent = state
                    conn.send(Batch(reader.take(), reader.lines, reader.matched, reader.malformed, source.lost,
                                    source.position))
            if not lines:
                time.sleep(min(0.1, flush_s))
    except (BrokenPipeError, EOFError, OSError):
        pass  # the parent is gone
    finally:
        source.close()
