"""Capturing a real PyTorch process on its host's agent (the task is sent to the agent's
queue by traces.processes.requests): the agent's Kineto daemon (fleet/agent/kineto.py) hands
the process its configuration at its next poll, the process writes its trace into the
agent's own folder, and the file is stored like any capture and analysed on the traces queue
(a rank of a job: analysed with its job, traces.processes.jobs).

Progress goes to the trace's pages in words as for emulated captures: waiting for the
process's next poll (libkineto polls every 5 s), tracing, writing, storing; then the
analysis.
"""

from __future__ import annotations

import gzip
import io
import logging
import re
import threading
import time
from datetime import UTC, datetime

import orjson
from django.conf import settings
from django.db import connections
from django.utils import timezone

from fleet.agent.kineto import CaptureRequest, KinetoError
from traces import events
from traces.choices import TraceStatus
from traces.models import Trace
from traces.processes import jobs as process_jobs
from traces.store.files import TraceFiles, store_errors
from traces.writers import _enqueue_analysis, _tell_pages, fail, move

log = logging.getLogger(__name__)

#: Seconds a process may take to poll (libkineto: every 5 s) and then to write its trace.
POLL_WAIT_S = 15.0
WRITE_WAIT_S = 30.0
_COMPLETE_EVENT = re.compile(rb'"ph"\s*:\s*"X"')


# -- capturing (the agent's side) ------------------------------------------------------------
def start_capture(trace_id: int) -> threading.Thread:
    """Run :func:`run_process_capture` in a thread of its own and return at once: the agent's
    worker (Celery's solo pool, one task at a time) would otherwise stop polling its devices
    for the whole capture, and their graphs would have a hole there."""

    def run() -> None:
        try:
            run_process_capture(trace_id)
        except Exception:
            log.exception("trace %s: the capture failed", trace_id)
            fail(trace_id, "the agent's capture stopped on an error: see the agent's log")
        finally:
            connections.close_all()  # this thread's own

    thread = threading.Thread(target=run, name=f"capture-{trace_id}", daemon=True)
    thread.start()
    return thread


def run_process_capture(trace_id: int) -> None:
    """Capture the process the trace names (params: pid, duration_s or iterations; a job's
    rank: start_time_ms or iteration_roundup), store it, and queue its analysis."""
    # The agent's own daemon (fleet.agent.run starts nothing on import; imported here, where it runs).
    from fleet.agent.run import kineto_daemon

    if not move(trace_id, [TraceStatus.QUEUED], TraceStatus.CAPTURING, capture_started_at=timezone.now()):
        return
    trace = Trace.objects.get(pk=trace_id)
    job_id = trace.params.get("job")
    failed = (lambda reason: process_jobs.rank_failed(trace, reason)) if job_id else (lambda reason: fail(trace_id, reason))
    if job_id and not process_jobs.rank_started(trace):
        return
    daemon = kineto_daemon()
    if daemon is None:
        failed(f"{trace.host_name}'s agent does not serve Kineto captures (AGENT_KINETO=off, or another daemon owns "
               "the socket: see the agent's log)")
        return
    try:
        path = _capture(daemon, trace)
    except (KinetoError, ValueError) as exc:
        failed(str(exc))
        return
    _tell_pages(events.trace_progress, trace_id, TraceStatus.CAPTURING, 0.97, 0, "Storing the trace")
    try:
        raw = _with_distributed_info(_read_bounded(path, trace.params["pid"]), trace.params)
    except ValueError as exc:
        failed(str(exc))
        return
    finally:
        path.unlink(missing_ok=True)
    packed = gzip.compress(raw, compresslevel=6)
    files = TraceFiles(trace_id)
    name = files.raw_name(head=packed[:2])
    try:
        files.save_stream(name, io.BytesIO(packed))
    except store_errors() as exc:
        failed(f"the capture could not be stored: the trace storage answered {exc}")
        return
    moved = move(trace_id, [TraceStatus.CAPTURING], TraceStatus.ANALYSING, capture_ended_at=timezone.now(),
                 raw_file=name, raw_format="chrome", raw_bytes=len(packed), stored_bytes=len(packed), progress=0.0)
    if moved and job_id:
        process_jobs.rank_stored(trace)
    elif moved:
        _enqueue_analysis(trace_id)


def _capture(daemon, trace: Trace):
    """Ask the daemon, follow the capture's stages on the pages, return the trace file."""
    params = trace.params
    pid, iterations = params["pid"], params.get("iterations")
    if iterations:
        request = CaptureRequest(duration_ms=None, iterations=iterations,
                                 iteration_roundup=params.get("iteration_roundup", 1))
    else:
        request = CaptureRequest(duration_ms=round(params["duration_s"] * 1000))
    daemon.request_capture(pid, request, f"trace-{trace.pk}", start_time_ms=params.get("start_time_ms", 0))
    ticker = _Ticker(daemon, trace)
    ticker.start()
    try:
        lead = max(0.0, params.get("start_time_ms", 0) / 1000 - time.time())
        return daemon.wait_for_trace(pid, deadline_s=lead + POLL_WAIT_S + params["duration_s"] + WRITE_WAIT_S)
    finally:
        ticker.stop()


def _read_bounded(path, pid: int) -> bytes:
    """The trace file's bytes, bounded; one with no operator in it is said so (libkineto
    writes an empty trace when the process ran nothing in the window)."""
    limit = settings.TRACE_UPLOAD_MAX_MB << 20
    size = path.stat().st_size
    if size > limit:
        raise ValueError(f"the process wrote a trace of {size:,} bytes, over TRACE_UPLOAD_MAX_MB ({limit:,} bytes)")
    raw = path.read_bytes()
    if not _COMPLETE_EVENT.search(raw):
        raise ValueError(f"process {pid} ran no PyTorch operator during the capture: it was idle or blocked "
                         f"(waiting in a collective for another rank, or for its input?)")
    return raw


def _with_distributed_info(raw: bytes, params: dict) -> bytes:
    """The trace with ``distributedInfo`` (rank, world size, backend) where the process did not
    write it and its job says its rank, so the job's tools can group ranks (dynolog's #155)."""
    if "rank" not in params or b'"distributedInfo"' in raw[:65536]:
        return raw
    start = raw.find(b"{")
    if start < 0:
        raise ValueError("the process wrote a trace that is not a JSON object")
    info = orjson.dumps({"rank": params["rank"], "world_size": params.get("world_size"), "backend": "unknown"})
    return raw[: start + 1] + b'"distributedInfo": ' + info + b", " + raw[start + 1 :]


def stage_words(stage: str, params: dict, now: float) -> str:
    """Where a capture is, as the page says it."""
    pid = params["pid"]
    start = params.get("start_time_ms", 0) / 1000
    if stage == "waiting":
        if start > now:
            return f"Waiting for the job's start at {datetime.fromtimestamp(start, UTC):%H:%M:%S} UTC"
        return f"Waiting for process {pid}'s next poll (every 5 s)"
    if stage == "tracing":
        what = f"{params['iterations']} iterations" if params.get("iterations") else f"{params['duration_s']:g} s"
        return f"Tracing process {pid} ({what})"
    if stage == "writing":
        return f"Process {pid} is writing its trace"
    return ""


class _Ticker:
    """Pushes the capture's stage and progress twice a second while the agent waits."""

    def __init__(self, daemon, trace: Trace):
        self.daemon, self.trace = daemon, trace
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name=f"capture-{trace.pk}")

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(2)

    def _run(self) -> None:
        params, traced_since = self.trace.params, None
        duration = params["duration_s"] if not params.get("iterations") else None
        while not self._stop.wait(0.5):
            stage = self.daemon.stage(params["pid"])
            now = time.time()
            if stage == "waiting":
                fraction = 0.02
            elif stage == "tracing":
                traced_since = traced_since or now
                fraction = 0.05 + 0.85 * min(1.0, (now - traced_since) / duration) if duration else 0.5
            else:
                fraction = 0.92
            words = stage_words(stage, params, now)
            _tell_pages(events.trace_progress, self.trace.pk, TraceStatus.CAPTURING, fraction, 0, words)
            if params.get("job"):
                process_jobs.rank_progress(self.trace, fraction, words)
