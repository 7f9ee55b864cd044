"""A capture of a real PyTorch process, run by its host's agent (the task is sent to the
agent's queue, traces.writers._request_process_capture): the agent's Kineto daemon
(fleet/agent/kineto.py) hands the process its configuration at its next poll, the process
writes its trace into the agent's own folder, and the file is stored like any capture and
analysed on the traces queue.

Progress goes to the trace's pages as for emulated captures: waiting for the process's next
poll (libkineto polls every 5 s), tracing, then storing.
"""

from __future__ import annotations

import gzip
import io
import threading
import time

import orjson
from django.conf import settings
from django.utils import timezone

from fleet.agent.kineto import CaptureRequest, KinetoError
from fleet.agent.run import kineto_daemon
from traces import events
from traces.choices import TraceStatus
from traces.models import Trace
from traces.store.files import TraceFiles, store_errors
from traces.writers import _enqueue_analysis, _tell_pages, fail, move

#: Seconds a process may take to poll (libkineto: every 5 s) and then to write its trace.
POLL_WAIT_S = 15.0
WRITE_WAIT_S = 30.0


def run_process_capture(trace_id: int) -> None:
    """Capture the process the trace names (params: pid, duration_s), store, queue analysis."""
    if not move(trace_id, [TraceStatus.QUEUED], TraceStatus.CAPTURING, capture_started_at=timezone.now()):
        return
    trace = Trace.objects.select_related("device__host").get(pk=trace_id)
    daemon = kineto_daemon()
    if daemon is None:
        fail(trace_id, f"{trace.host_name}'s agent does not serve Kineto captures (AGENT_KINETO=off, or another "
                       "daemon owns the socket: see the agent's log)")
        return
    pid, duration_s, iterations = trace.params["pid"], trace.params["duration_s"], trace.params.get("iterations")
    if iterations:
        request = CaptureRequest(duration_ms=None, iterations=iterations)
    else:
        request = CaptureRequest(duration_ms=round(duration_s * 1000))
    try:
        daemon.request_capture(pid, request, f"trace-{trace_id}")
        ticker = _Ticker(trace_id, duration_s)
        ticker.start()
        try:
            path = daemon.wait_for_trace(pid, deadline_s=POLL_WAIT_S + duration_s + WRITE_WAIT_S)
        finally:
            ticker.stop()
    except KinetoError as exc:
        fail(trace_id, str(exc))
        return
    try:
        raw = _with_distributed_info(_read_bounded(path), trace.params)
    except ValueError as exc:
        fail(trace_id, str(exc))
        return
    finally:
        path.unlink(missing_ok=True)
    packed = gzip.compress(raw, compresslevel=6)
    files = TraceFiles(trace_id)
    name = files.raw_name(head=packed[:2])
    try:
        files.save_stream(name, io.BytesIO(packed))
    except store_errors() as exc:
        fail(trace_id, f"the capture could not be stored: the trace storage answered {exc}")
        return
    moved = move(trace_id, [TraceStatus.CAPTURING], TraceStatus.ANALYSING, capture_ended_at=timezone.now(),
                 raw_file=name, raw_format="chrome", raw_bytes=len(packed), stored_bytes=len(packed), progress=0.0)
    if moved:
        _enqueue_analysis(trace_id)


def _read_bounded(path) -> bytes:
    limit = settings.TRACE_UPLOAD_MAX_MB << 20
    size = path.stat().st_size
    if size > limit:
        raise ValueError(f"the process wrote a trace of {size:,} bytes, over TRACE_UPLOAD_MAX_MB ({limit:,} bytes)")
    return path.read_bytes()


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


class _Ticker:
    """Pushes the capture's progress while the agent waits: the poll, then the tracing."""

    def __init__(self, trace_id: int, duration_s: float):
        self.trace_id, self.duration_s = trace_id, duration_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name=f"capture-{trace_id}")

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(2)

    def _run(self) -> None:
        began = time.monotonic()
        total = POLL_WAIT_S / 3 + self.duration_s
        while not self._stop.wait(0.5):
            fraction = min(0.95, (time.monotonic() - began) / total)
            _tell_pages(events.trace_progress, self.trace_id, TraceStatus.CAPTURING, fraction, 0)
