"""Kineto's on-demand profiling protocol, served by the agent: capture any PyTorch process
started with ``KINETO_USE_DAEMON=1``, with no change to its code.

libkineto (inside every PyTorch since 2.0) then talks to a local daemon (dynolog is Meta's)
over a Unix datagram socket named ``dynolog``, in the abstract namespace, or under the
folder ``KINETO_IPC_SOCKET_DIR`` names when that is set. Each datagram is a header, the
payload's size (``size_t``) and its type (32 bytes, NUL-padded), then the payload:

* ``ctxt`` (a process that created a GPU context): ``int32 gpu, int32 pid, int64 job id``;
  answered with an ``int32`` (the daemon's count of processes on that GPU);
* ``req`` (every few seconds, from every process; CPU-only ones too): ``int32 type`` (1:
  event counters, 2: activities, 3: both), ``int32 n``, ``int64 job id`` (``SLURM_JOB_ID``),
  then ``n`` ``int32`` pids, the process's own first, then its ancestors; answered with the
  configuration to apply as text (``KEY=value`` lines), empty for none.

Measured here (torch 2.13.0 CPU): a process polls every 5 s, and writes its trace to the
``ACTIVITIES_LOG_FILE`` given with ``_<pid>`` before the extension. The wire format is
public in libkineto's and dynolog's sources; the code is ours.

:class:`KinetoDaemon` holds the socket, the processes seen (:class:`TracedProcess`) and the
captures asked for: a capture is handed to the process at its next poll. It imports the
standard library alone (the agent runs it in a thread).
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import socket
import struct
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

DAEMON_NAME = "dynolog"
HEADER = struct.Struct("=Q32s")  # size_t size; char type[32]
CONTEXT = struct.Struct("=iiq")  # int32 gpu; int32 pid; int64 job id
REQUEST = struct.Struct("=iiq")  # int32 type; int32 n; int64 job id; then n int32 pids
COUNT = struct.Struct("=i")
ACTIVITIES = 2  # a req's type bit: the process asks for an activities (trace) configuration
MAX_DATAGRAM = 64 * 1024

# libkineto names its own end "dynoconfigclient" + a UUID (52 characters) in the same folder,
# and a Unix socket's path holds at most 107 bytes: a longer folder, and processes never poll.
MAX_SOCKET_DIR = 107 - 1 - 52

MAX_DURATION_MS = 60_000
MAX_ITERATIONS = 1_000
MAX_ROUNDUP = 100_000
#: Free space the agent's trace folder must have for a capture to be asked (a trace of a
#: few seconds of a busy process is tens of MB).
MIN_FREE_BYTES = 64 << 20


class KinetoError(Exception):
    """A capture that cannot be asked for or did not come, said in words."""


class SocketTaken(KinetoError):
    """Another daemon (dynolog?) already serves Kineto on this host."""


@dataclass
class TracedProcess:
    """A process that polled: its pid, its ancestors (nearest first), job id, GPUs."""

    pid: int
    ancestors: tuple[int, ...] = ()
    job_id: int = 0
    gpus: set[int] = field(default_factory=set)
    first_seen: float = 0.0
    last_poll: float = 0.0
    polls: int = 0
    handed_at: float | None = None  # when it took its latest capture's configuration


@dataclass(frozen=True)
class CaptureRequest:
    """What to capture, from validated fields only (never free text)."""

    duration_ms: int | None = 2000
    iterations: int | None = None
    #: By iterations: start at the next multiple of this iteration count (the ranks of a job
    #: step together, so they all start on the same iteration).
    iteration_roundup: int = 1
    record_shapes: bool = False
    with_stack: bool = False
    profile_memory: bool = False

    def __post_init__(self):
        if (self.duration_ms is None) == (self.iterations is None):
            raise KinetoError("a capture is by duration or by iterations, one of the two")
        if self.duration_ms is not None and not (isinstance(self.duration_ms, int) and 1 <= self.duration_ms <= MAX_DURATION_MS):
            raise KinetoError(f"duration_ms must be a whole number of milliseconds from 1 to {MAX_DURATION_MS}")
        if self.iterations is not None and not (isinstance(self.iterations, int) and 1 <= self.iterations <= MAX_ITERATIONS):
            raise KinetoError(f"iterations must be a whole number from 1 to {MAX_ITERATIONS}")
        if not (isinstance(self.iteration_roundup, int) and 1 <= self.iteration_roundup <= MAX_ROUNDUP):
            raise KinetoError(f"iteration_roundup must be a whole number from 1 to {MAX_ROUNDUP}")

    def config(self, log_file: Path, start_time_ms: int = 0) -> str:
        """The configuration libkineto reads: its own keys, one a line."""
        # No warm-up: libkineto waits 5 s by default before it starts tracing what it was
        # asked on demand (measured here: 13.7 s from the request to the file for 2 s traced).
        lines = [f"ACTIVITIES_LOG_FILE={log_file}", "ACTIVITIES_WARMUP_PERIOD_SECS=0"]
        if self.iterations is not None:
            lines += [f"ACTIVITIES_ITERATIONS={self.iterations}", "PROFILE_START_ITERATION=0",
                      f"PROFILE_START_ITERATION_ROUNDUP={self.iteration_roundup}"]
        else:
            lines += [f"ACTIVITIES_DURATION_MSECS={self.duration_ms}", f"PROFILE_START_TIME={start_time_ms}"]
        lines += [
            f"PROFILE_REPORT_INPUT_SHAPES={str(self.record_shapes).lower()}",
            f"PROFILE_WITH_STACK={str(self.with_stack).lower()}",
            f"PROFILE_PROFILE_MEMORY={str(self.profile_memory).lower()}",
        ]
        return "\n".join(lines) + "\n"


def trace_file_of(log_file: Path, pid: int) -> Path:
    """Where libkineto writes a process's trace: ``<stem>_<pid><suffix>`` beside the file named."""
    return log_file.with_name(f"{log_file.stem}_{pid}{log_file.suffix}")


def socket_address(socket_dir: str | None) -> str | bytes:
    """The daemon's address: a path under ``socket_dir``, or the abstract name as libkineto
    writes it, NUL-terminated (the address's length counts the trailing NUL: without it the
    name is another socket, and no process ever reaches the agent)."""
    return str(Path(socket_dir) / DAEMON_NAME) if socket_dir else b"\0" + DAEMON_NAME.encode() + b"\0"


class KinetoDaemon:
    """Serves Kineto's daemon protocol on this host (see the module's words)."""

    def __init__(self, trace_dir: Path, socket_dir: str | None = None, clock=time.time,
                 min_free_bytes: int = MIN_FREE_BYTES):
        self.trace_dir = Path(trace_dir)
        self.socket_dir = socket_dir
        self.clock = clock
        self.min_free_bytes = min_free_bytes
        self.processes: dict[int, TracedProcess] = {}
        self._pending: dict[int, str] = {}  # pid -> configuration to hand over at its next poll
        self._handed: dict[int, Path] = {}  # pid -> the trace file it was told to write
        self._starts: dict[int, float] = {}  # pid -> the wall-clock second its capture starts (a job's)
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._sock = self._bind()

    def _bind(self) -> socket.socket:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        address = socket_address(self.socket_dir)
        if isinstance(address, str):
            if len(os.fsencode(self.socket_dir)) > MAX_SOCKET_DIR:
                sock.close()
                raise KinetoError(f"KINETO_IPC_SOCKET_DIR {self.socket_dir} is longer than {MAX_SOCKET_DIR} bytes: "
                                  f"libkineto's own socket names in it would not fit a Unix socket's path")
            Path(self.socket_dir).mkdir(parents=True, exist_ok=True)
            if _answers(address):
                sock.close()
                raise SocketTaken(self._taken_message(address))
            Path(address).unlink(missing_ok=True)  # left by a daemon that is gone
        try:
            sock.bind(address)
        except OSError as exc:
            sock.close()
            if exc.errno == errno.EADDRINUSE:
                raise SocketTaken(self._taken_message(address)) from None
            raise
        if isinstance(address, str):
            Path(address).chmod(0o666)  # the jobs' users write to it, as to dynolog's
        self.trace_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        return sock

    def _taken_message(self, address) -> str:
        where = address if isinstance(address, str) else f"the abstract socket @{DAEMON_NAME}"
        return (f"another daemon (dynolog?) already serves Kineto at {where}: give the agent and the jobs "
                f"their own folder with KINETO_IPC_SOCKET_DIR, or stop that daemon to let Asicmon capture")

    def close(self) -> None:
        self._closed.set()
        self._sock.close()
        if self.socket_dir:
            Path(socket_address(self.socket_dir)).unlink(missing_ok=True)

    # ---- the protocol

    def serve(self, stop: threading.Event, timeout: float = 0.5) -> None:
        """Answer datagrams until ``stop`` is set or the daemon is closed."""
        self._sock.settimeout(timeout)
        while not stop.is_set() and not self._closed.is_set():
            try:
                data, sender = self._sock.recvfrom(MAX_DATAGRAM)
            except TimeoutError:
                continue
            except OSError:
                if stop.is_set() or self._closed.is_set():
                    return
                raise
            self.handle(data, sender)

    def handle(self, data: bytes, sender) -> None:
        """One datagram: its answer sent back; malformed ones dropped."""
        if len(data) < HEADER.size or not sender:
            return
        size, kind = HEADER.unpack_from(data)
        kind = kind.split(b"\0", 1)[0]
        body = data[HEADER.size : HEADER.size + size]
        if len(body) != size:
            return
        if kind == b"ctxt" and size >= CONTEXT.size:
            gpu, pid, job_id = CONTEXT.unpack_from(body)
            count = self._register(pid, gpu, job_id)
            self._reply(sender, b"ctxt", COUNT.pack(count))
        elif kind == b"req" and size >= REQUEST.size:
            kinds, n, job_id = REQUEST.unpack_from(body)
            if n < 1 or size < REQUEST.size + 4 * n:
                return
            pids = struct.unpack_from(f"={n}i", body, REQUEST.size)
            config = self._poll(pids, job_id, bool(kinds & ACTIVITIES))
            self._reply(sender, b"req", config.encode())

    def _reply(self, to, kind: bytes, payload: bytes) -> None:
        with contextlib.suppress(OSError):  # the process is gone: it asks again at its next poll if not
            self._sock.sendto(HEADER.pack(len(payload), kind) + payload, to)

    def _register(self, pid: int, gpu: int, job_id: int) -> int:
        with self._lock:
            process = self._process(pid, job_id)
            process.gpus.add(gpu)
            return sum(gpu in p.gpus for p in self.processes.values())

    def _process(self, pid: int, job_id: int) -> TracedProcess:
        now = self.clock()
        process = self.processes.get(pid)
        if process is None:
            process = self.processes[pid] = TracedProcess(pid, job_id=job_id, first_seen=now)
        process.job_id = job_id or process.job_id
        return process

    def _poll(self, pids: tuple[int, ...], job_id: int, activities: bool) -> str:
        pid = pids[0]
        with self._lock:
            process = self._process(pid, job_id)
            process.ancestors = tuple(pids[1:])
            process.last_poll = self.clock()
            process.polls += 1
            if activities and pid in self._pending:
                process.handed_at = process.last_poll
                return self._pending.pop(pid)
        return ""

    def live_processes(self, within_s: float) -> list[TracedProcess]:
        """The processes that polled within ``within_s``; the others are forgotten (gone,
        or no longer started with KINETO_USE_DAEMON=1)."""
        since = self.clock() - within_s
        with self._lock:
            for pid in [pid for pid, p in self.processes.items() if p.last_poll and p.last_poll < since]:
                del self.processes[pid]
            return [TracedProcess(p.pid, p.ancestors, p.job_id, set(p.gpus), p.first_seen, p.last_poll, p.polls)
                    for p in self.processes.values()]

    # ---- captures

    def request_capture(self, pid: int, request: CaptureRequest, name: str, start_time_ms: int = 0) -> Path:
        """Hand ``request`` to process ``pid`` at its next poll; where its trace will be.

        ``name`` (letters, digits, '-' and '_') names the file inside the agent's own trace
        folder: nothing from outside names a path. ``start_time_ms`` (a job's ranks: the same
        wall-clock instant for all, in ms since the epoch) starts a capture by duration then."""
        if not name or not all(c.isalnum() or c in "-_" for c in name):
            raise KinetoError("a capture's name is letters, digits, '-' and '_'")
        free = shutil.disk_usage(self.trace_dir).free
        if free < self.min_free_bytes:
            raise KinetoError(f"the agent's trace folder {self.trace_dir} has {free / 2**20:.1f} MB free, under the "
                              f"{self.min_free_bytes / 2**20:.0f} MB a capture needs: free space on that disk")
        with self._lock:
            if pid not in self.processes:
                raise KinetoError(f"no process {pid} has polled this agent (started with KINETO_USE_DAEMON=1?)")
            if pid in self._pending or (pid in self._handed and not self._handed[pid].exists()):
                raise KinetoError(f"process {pid} is already being captured")
            log_file = self.trace_dir / f"{name}.json"
            self._pending[pid] = request.config(log_file, start_time_ms)
            self._handed[pid] = trace_file_of(log_file, pid)
            self._starts[pid] = start_time_ms / 1000 if start_time_ms and request.iterations is None else 0.0
            self.processes[pid].handed_at = None
        return self._handed[pid]

    def stage(self, pid: int) -> str:
        """Where ``pid``'s capture is: "waiting" (for its next poll), "tracing", "writing"
        (its file has begun), or "" (none asked)."""
        with self._lock:
            if pid in self._pending:
                return "waiting"
            path = self._handed.get(pid)
        if path is None:
            return ""
        return "writing" if path.exists() or _partial_of(path).exists() else "tracing"

    def wait_for_trace(self, pid: int, deadline_s: float, settle_s: float = 0.5) -> Path:
        """The trace file of ``pid``'s capture once written whole (a JSON document whose size
        stayed the same for ``settle_s``), or a :class:`KinetoError` saying why it did not come."""
        path = self._handed.get(pid)
        if path is None:
            raise KinetoError(f"no capture was asked of process {pid}")
        partial = _partial_of(path)
        end = time.monotonic() + deadline_s
        size = -1
        while time.monotonic() < end:
            self._check_start(pid)
            if path.exists():
                now = path.stat().st_size
                if now == size and now > 0 and _ends_whole(path):
                    with self._lock:  # done: the next capture of this process may be asked
                        self._handed.pop(pid, None)
                        self._starts.pop(pid, None)
                    return path
                size = now
                time.sleep(settle_s)
                continue
            if partial.exists():  # libkineto writes <file>.tmp, then renames it
                now = partial.stat().st_size
                if now == size and shutil.disk_usage(partial.parent).free < 1 << 20:
                    partial.unlink(missing_ok=True)
                    raise KinetoError(f"the trace did not come whole: the disk of the agent's trace folder "
                                      f"{path.parent} is full (the trace stopped at {now:,} bytes)")
                size = now
                time.sleep(settle_s)
                continue
            if not _alive(pid):
                break
            time.sleep(0.1)
        raise KinetoError(f"the trace did not come: {self._why_not(pid, path, deadline_s)}")

    def _check_start(self, pid: int) -> None:
        """A job's capture that cannot start: the process took it after the job's start time
        (libkineto does not start in the past), or had not polled by then."""
        start = self._starts.get(pid, 0.0)
        if not start:
            return
        with self._lock:
            process = self.processes.get(pid)
            handed = process.handed_at if process else None
            pending = pid in self._pending
        late = handed is not None and handed > start
        if late or (pending and self.clock() > start + 1.0):
            with self._lock:
                self._pending.pop(pid, None)
                self._handed.pop(pid, None)
            when = f"polled {handed - start:.1f} s after" if late else "did not poll before"
            raise KinetoError(f"the trace did not come: process {pid} {when} the job's start time, and "
                              f"libkineto does not start a trace in the past (libkineto polls every 5 s)")

    def _why_not(self, pid: int, path: Path, deadline_s: float) -> str:
        with self._lock:
            process = self.processes.get(pid)
            waiting = self._pending.pop(pid, None) is not None
        since = f"{self.clock() - process.last_poll:.0f} s ago" if process else "never"
        if not _alive(pid):
            return f"process {pid} exited during the capture (it last polled {since})"
        if waiting:
            return f"process {pid} did not poll within {deadline_s:.0f} s (it last polled {since})"
        if not os.access(path.parent, os.W_OK):
            return f"the trace folder {path.parent} is not writable"
        if path.exists() or _partial_of(path).exists():
            return f"process {pid} was still writing its trace after {deadline_s:.0f} s"
        return f"process {pid} took the capture but wrote no trace within {deadline_s:.0f} s"


def _partial_of(path: Path) -> Path:
    """The file libkineto writes a trace into before renaming it to ``path``."""
    return path.with_name(path.name + ".tmp")


def _ends_whole(path: Path) -> bool:
    """Whether the file ends as a JSON object does (libkineto writes its closing brace last)."""
    with path.open("rb") as f:
        f.seek(max(0, path.stat().st_size - 64))
        return f.read().rstrip().endswith(b"}")


def _answers(path: str) -> bool:
    """Whether a datagram socket at ``path`` is served (a live daemon, not a stale file)."""
    if not Path(path).exists():
        return False
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    try:
        probe.connect(path)
        return True
    except OSError:
        return False
    finally:
        probe.close()


def _alive(pid: int, proc: Path = Path("/proc")) -> bool:
    """Whether process ``pid`` runs (a zombie, dead but not yet reaped by its parent, does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    try:
        stat = (proc / str(pid) / "stat").read_text()
    except OSError:
        return True  # no /proc to say more
    state = stat[stat.rindex(")") + 2 :][:1]
    return state not in ("Z", "X")
