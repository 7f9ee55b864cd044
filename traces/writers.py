"""The writers of traces: request a capture, accept an upload, run a capture, analyse.

Every state change is a conditional update (``filter(status=...).update(...)``), so two
workers never act on one trace twice, and every change is pushed to the trace's
websocket group. Tasks (traces/tasks.py) are thin wrappers taking ids; they import this
module, so it queues them by name through traces/queueing.py.
"""

from __future__ import annotations

import gzip
import io
import logging
import time
from datetime import timedelta
from pathlib import PurePath

import redis
from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone
from kombu.exceptions import OperationalError as BrokerUnavailable

from emulator import EmulatedHost
from emulator.config import find_host
from emulator.serving.engine import SERVING_PROBLEMS
from emulator.workloads.graph import workload_for
from emulator.workloads.tracing import PROBLEMS as CAPTURE_PROBLEMS
from emulator.workloads.tracing import DeviceHung, DeviceNow, capture_live
from fleet.agent.queues import capture_unavailable_reason
from fleet.durations import human_duration
from fleet.hosts.emulated_fleet import fleet_config, state_store
from traces import atrace, events, queueing
from traces.choices import ACTIVE_STATUSES, TraceSource, TraceStatus
from traces.models import Trace
from traces.refusals import (  # noqa: F401 (callers name the refusals services.X)
    BadTrace,
    CaptureUnavailable,
    DeviceBusy,
    StorageFull,
    TraceRefused,
)
from traces.requests.live import serving_for
from traces.store import page_data, results
from traces.store.files import CHROME, TraceFiles, store_errors
from traces.store.storage_budget import (  # noqa: F401
    budget_held,
    delete_trace,
    make_room,
    prune_traces,
    retention_cutoff,
    take_room,
)
from traces.uploads.check import CheckedTrace, check_trace
from traces.uploads.sources import Source

log = logging.getLogger(__name__)

MIN_CAPTURE_S, MAX_CAPTURE_S, DEFAULT_CAPTURE_S = 1, 60, 5
MAX_ITERATIONS = 1000  # fleet.agent.kineto.MAX_ITERATIONS
#: Analysis attempts (a worker killed mid-analysis redelivers) before a trace fails.
MAX_ANALYSIS_ATTEMPTS = 3
#: Extra seconds a capture may take beyond its duration before it counts as stuck.
CAPTURE_GRACE_S = 60
#: How often a running capture writes its progress to the row (pushes are more frequent:
#: the page's socket opens after the click's answer, so it sees the first push after that).
PROGRESS_ROW_EVERY_S = 1.0
PROGRESS_PUSH_EVERY_S = 0.1


# -- state changes -------------------------------------------------------------------
def move(trace_id: int, from_statuses, to: str, **fields) -> bool:
    """Move a trace from one of ``from_statuses`` to ``to``; False if another got there first."""
    now = timezone.now()
    changed = Trace.objects.filter(pk=trace_id, status__in=list(from_statuses)).update(
        status=to, status_changed_at=now, **fields
    )
    if changed:
        trace = Trace.objects.get(pk=trace_id)
        _tell_pages(events.trace_changed, trace_id, to, trace.progress, trace.error, url=trace.get_absolute_url())
    return bool(changed)


def _tell_pages(send, *args, **kwargs) -> None:
    """Push a change to the trace's open pages: the row is the record, so a channel layer
    that is down costs a live update (pages read the row when they load), never the change."""
    try:
        send(*args, **kwargs)
    except (OSError, redis.RedisError) as exc:
        log.warning("trace %s: live update not sent (%s)", args[0], exc)


def fail(trace_id: int, reason: str, from_statuses=None) -> bool:
    log.warning("trace %s failed: %s", trace_id, reason)
    return move(trace_id, from_statuses or ACTIVE_STATUSES, TraceStatus.FAILED, error=reason[:2000])


# -- capture ---------------------------------------------------------------------------
def validate_duration(raw) -> float:
    try:
        duration = float(raw)
    except (TypeError, ValueError):
        raise BadTrace(f"duration_s must be a number of seconds, not {raw!r}") from None
    if not MIN_CAPTURE_S <= duration <= MAX_CAPTURE_S:
        raise BadTrace(f"duration_s must be between {MIN_CAPTURE_S} and {MAX_CAPTURE_S} seconds, not {raw!r}")
    return duration


def _device_facts(device) -> dict:
    spec = find_host(fleet_config(), device.host.name).device(device.serial)
    serving = device.device_type in settings.EMULATOR_SERVING_TYPES  # an inference service (traces/requests/live.py)
    return {"sw_version": spec.sw_version, "workload": "llm_serving" if serving else workload_for(device.device_type).name}


def validate_problems(raw, *, serving: bool = False) -> list[str]:
    """The emulator's problems a capture should have: names from emulator.workloads.tracing.PROBLEMS, or
    from emulator.serving.engine.SERVING_PROBLEMS for a device that serves requests (``serving``)."""
    if raw in (None, "", []):
        return []
    if not isinstance(raw, list | tuple) or not all(isinstance(p, str) for p in raw):
        raise BadTrace(f"problems must be a list of names, not {raw!r}")
    known, which = (SERVING_PROBLEMS, "an inference device serving requests") if serving else (CAPTURE_PROBLEMS, "this device")
    if unknown := sorted(set(raw) - set(known)):
        raise BadTrace(f"unknown problems {', '.join(unknown)} for {which}; known: {', '.join(known)}")
    return sorted(set(raw))


def validate_iterations(raw, host) -> int:
    """Iterations (optimizer steps) to capture of a real PyTorch process (hosts with an agent)."""
    if not host.has_agent:
        raise BadTrace("iterations: a capture by iterations is of a real PyTorch process, on a host with an agent; "
                       "give duration_s here")
    return validate_iteration_count(raw)


def validate_iteration_count(raw) -> int:
    if isinstance(raw, bool) or not isinstance(raw, int | str) or not str(raw).strip().isdigit():
        raise BadTrace(f"iterations must be a whole number from 1 to {MAX_ITERATIONS}, not {raw!r}")
    iterations = int(raw)
    if not 1 <= iterations <= MAX_ITERATIONS:
        raise BadTrace(f"iterations must be a whole number from 1 to {MAX_ITERATIONS}, not {raw!r}")
    return iterations


def request_capture(device, user, duration_s, problems=None, iterations=None) -> Trace:
    """Write the row (queued) and queue the capture when it commits; 409 if the device is busy.
    ``problems``: emulator problems to inject (see :func:`validate_problems`); ``iterations``:
    a capture of that many optimizer steps of a real process instead of ``duration_s``."""
    if iterations is not None:
        iterations = validate_iterations(iterations, device.host)
        duration_s = MAX_CAPTURE_S  # the bound the steps must fit in
    duration = validate_duration(duration_s)
    injected = validate_problems(problems, serving=device.device_type in settings.EMULATOR_SERVING_TYPES)
    unavailable = capture_unavailable_reason(device.host, device)
    if unavailable:
        raise CaptureUnavailable(unavailable)
    make_room(0)
    if device.host.has_agent:
        raise CaptureUnavailable(f"{device.serial} is a real device: its PyTorch processes are captured through "
                                 f"traces.processes.requests")
    facts = _device_facts(device)
    try:
        with transaction.atomic():
            trace = Trace.objects.create(
                name=f"{device.serial} {timezone.now():%Y-%m-%d %H:%M:%S}",
                source=TraceSource.CAPTURE,
                created_by=user,
                params={"duration_s": duration, **({"problems": injected} if injected else {})},
                device=device,
                host_name=device.host.name,
                device_type=device.device_type,
                **facts,
            )
    except IntegrityError:
        busy = Trace.objects.busy_captures().filter(device=device).first()
        which = f" (trace {busy.pk}, {busy.status})" if busy else ""
        raise DeviceBusy(f"device {device.serial} is already capturing a trace{which}; wait for it to finish") from None
    transaction.on_commit(lambda: _enqueue_capture(trace.pk))
    return trace


class _Progress:
    """Throttled progress: pushed a few times a second, written to the row once a second."""

    def __init__(self, trace_id: int):
        self.trace_id = trace_id
        self.pushed = self.saved = 0.0

    def __call__(self, fraction: float, captured: int) -> None:
        now = time.monotonic()
        if now - self.pushed >= PROGRESS_PUSH_EVERY_S or fraction >= 1.0:
            self.pushed = now
            events.trace_progress(self.trace_id, TraceStatus.CAPTURING, fraction, captured)
        if now - self.saved >= PROGRESS_ROW_EVERY_S:
            self.saved = now
            Trace.objects.filter(pk=self.trace_id, status=TraceStatus.CAPTURING).update(progress=fraction)


def _device_now(device):
    """A function of time giving the device's load and faults from its emulator state."""
    emulated = emulated_host(device.host.name)

    def now(t: float) -> DeviceNow:
        with emulated.locked():
            emulated.sync()
            state = emulated.state(device.serial)
            return DeviceNow(load=state.load, faults=frozenset(state.faults))

    return now


_emulated_hosts: dict[tuple, EmulatedHost] = {}


def emulated_host(host_name: str) -> EmulatedHost:
    """The emulated host whose state a capture reads (kept for the life of the process; it
    re-reads the state file the pollers write)."""
    config = fleet_config()
    key = (config, settings.EMULATOR_STATE, str(settings.EMULATOR_STATE_DIR), settings.REDIS_KEY_PREFIX, host_name)
    host = _emulated_hosts.get(key)
    if host is None:
        host = _emulated_hosts[key] = EmulatedHost(config, host_name, store=state_store())
    return host


def run_capture(trace_id: int) -> None:
    """Capture a queued trace in wall-clock time, store it gzipped and queue its analysis."""
    started = timezone.now()
    if not move(trace_id, [TraceStatus.QUEUED], TraceStatus.CAPTURING, capture_started_at=started):
        return  # gone, or another worker has it
    trace = Trace.objects.select_related("device__host").get(pk=trace_id)
    if trace.device is None:
        fail(trace_id, "the device was removed before the capture started")
        return
    try:
        live = capture_live(
            trace.device_type,
            trace.params["duration_s"],
            _device_now(trace.device),
            sw_version=trace.sw_version,
            seed=trace_id,
            max_events=settings.TRACE_CAPTURE_MAX_EVENTS,
            progress=_Progress(trace_id),
            problems=trace.params.get("problems", ()),
            serving=serving_for(trace),
        )
    except DeviceHung as exc:
        fail(trace_id, f"device {trace.device.serial} stopped answering: {exc}")
        return
    raw = chrome_gz(live.trace)
    files = TraceFiles(trace_id)
    name = files.raw_name(head=raw[:2])
    try:
        files.save_stream(name, io.BytesIO(raw))
    except store_errors() as exc:
        return fail(trace_id, f"the capture could not be stored: the trace storage answered {exc}")
    moved = move(
        trace_id, [TraceStatus.CAPTURING], TraceStatus.ANALYSING,
        capture_ended_at=timezone.now(), raw_file=name, raw_format="chrome", raw_bytes=len(raw),
        stored_bytes=len(raw), progress=0.0, iterations_kept=live.iterations_kept,
        iterations_run=live.iterations_run,
    )
    if moved:
        _enqueue_analysis(trace_id)


def chrome_gz(trace: atrace.Trace) -> bytes:
    buf = io.BytesIO()
    with gzip.GzipFile(fileobj=buf, mode="wb", compresslevel=3) as gz:
        atrace.write_chrome_trace(trace, gz, gzip_output=False)
    return buf.getvalue()


# -- upload ----------------------------------------------------------------------------
def check_trace_file(source) -> CheckedTrace:
    """Look at the first bytes of an upload (traces/uploads/check.py; the worker reads the
    rest): a problem there is a BadTrace with the engine's message, what and where.
    ``source``: a traces.uploads.sessions.Source."""
    if source.size == 0:
        raise BadTrace(f"{source.name}: the file is empty")
    stream = source.open()
    try:
        return check_trace(stream)
    except atrace.TraceError as exc:
        where = exc.where if exc.where and source.name in exc.where else f"{source.name}" + (f", {exc.where}" if exc.where else "")
        raise BadTrace(f"{where}: {exc.what}") from None
    finally:
        if hasattr(stream, "seek"):
            stream.seek(0)


def accept_upload(source, user, *, name: str = "", device=None, sw_version: str = "") -> Trace:
    """Look at the file's head, store it (streamed) and queue its analysis, which reads it.
    A bad head raises BadTrace and leaves no row and no file behind. ``source``: a
    traces.uploads.sessions.Source (a multipart file or a finished resumable upload)."""
    if not isinstance(source, Source):
        source = Source.of_file(source)
    checked = check_trace_file(source)
    meta, fmt = checked.meta, checked.format
    created: list[int] = []
    try:
        with budget_held(needed=not source.uploads):
            take_room(source)
            trace = Trace.objects.create(
                pk=getattr(source, "trace_id", None),  # reserved by the upload handler, if it did
                name=(name or PurePath(source.name).name)[:200],
                source=TraceSource.UPLOAD,
                created_by=user,
                device=device,
                host_name=device.host.name if device else "",
                device_type=device.device_type if device else str(meta.get("device_type", ""))[:32],
                sw_version=(sw_version or str(meta.get("sw_version", "")))[:32],
                workload=str(meta.get("workload", ""))[:64],
                raw_format=fmt[:16],
            )
            created.append(trace.pk)
            stored = store_raw(trace.pk, source)
            Trace.objects.filter(pk=trace.pk).update(raw_file=stored, raw_bytes=source.size, stored_bytes=source.size)
            transaction.on_commit(lambda: _enqueue_analysis(trace.pk))
    except BaseException:
        for trace_id in created:
            TraceFiles(trace_id).delete_all()
        raise
    trace.refresh_from_db()
    return trace


def store_raw(trace_id: int, source) -> str:
    """Copy an upload into the trace's raw file, chunk by chunk; the name stored."""
    first = source.open()
    head = first.read(2)
    if hasattr(first, "seek"):
        first.seek(0)  # a multipart upload's file: as_file() hands it over itself
    else:
        first.close()
    files = TraceFiles(trace_id)
    return files.save_source(files.raw_name(source.name, head), source)


# -- analysis --------------------------------------------------------------------------
def analyse(trace_id: int) -> None:
    """Read the raw trace once and store the results; a repeat (redelivery) redoes it."""
    trace = Trace.objects.filter(pk=trace_id).first()
    if trace is None or trace.status not in (TraceStatus.QUEUED, TraceStatus.ANALYSING):
        return
    if trace.attempts >= MAX_ANALYSIS_ATTEMPTS:
        fail(trace_id, f"analysis did not finish in {MAX_ANALYSIS_ATTEMPTS} attempts (the worker died each time)")
        return
    claimed = Trace.objects.filter(pk=trace_id, status__in=[TraceStatus.QUEUED, TraceStatus.ANALYSING]).update(
        status=TraceStatus.ANALYSING, attempts=trace.attempts + 1, analysis_started_at=timezone.now(),
        status_changed_at=timezone.now(),
    )
    if not claimed:
        return
    events.trace_changed(trace_id, TraceStatus.ANALYSING, 0.0, "", url=trace.get_absolute_url())
    files = TraceFiles(trace_id)
    stored_as = ""
    try:
        with files.storage.open(trace.raw_file, "rb") as f:
            stored_as = f.name
            parsed = read_bounded(f)
        bd = atrace.operator_breakdown(parsed)
        corr = atrace.correlate(parsed)
        written = results.write_results(files, parsed, bd, corr)
        path = results.critical_path_or_none(parsed)
        page_data_bytes = page_data.store_page_data(files, parsed, breakdown=bd, path=path, correlation=corr)
    except atrace.TraceError as exc:
        # The engine names the file it read: the upload's name for people, not the storage's path.
        reason = str(exc).replace(stored_as, trace.name) if stored_as else str(exc)
        fail(trace_id, f"the trace cannot be analysed: {reason}")
        return
    except store_errors() as exc:
        return fail(trace_id, f"the trace could not be read or its results stored: the trace storage answered {exc}")
    meta = parsed.meta
    stored = trace.raw_bytes + written.bytes + page_data_bytes
    move(
        trace_id, [TraceStatus.ANALYSING], TraceStatus.READY,
        ready_at=timezone.now(), progress=1.0, events=written.events, span_us=written.span_us,
        started_at_us=written.start_us, stored_bytes=stored,
        workload=trace.workload or str(meta.get("workload", ""))[:64],
        raw_format=_read_format(trace, meta),
    )
    # The download comes last: the pages need only what is above.
    size = results.write_chrome(files, parsed, path)
    Trace.objects.filter(pk=trace_id).update(stored_bytes=stored + size)


def read_bounded(f) -> atrace.Trace:
    """Read a stored trace in a worker, refusing one that decompresses past TRACE_PARSE_MAX_MB
    (a gzip bomb fails its trace, not the worker)."""
    limit = settings.TRACE_PARSE_MAX_MB << 20
    try:
        return atrace.read_trace(f, max_bytes=limit)
    except atrace.TraceTooLargeError as exc:
        raise atrace.TraceTooLargeError(
            f"{exc.what}; a worker parses at most {settings.TRACE_PARSE_MAX_MB} MB of trace text "
            "(TRACE_PARSE_MAX_MB)", exc.where) from None


def _read_format(trace: Trace, meta: dict) -> str:
    """The format the reader found, for an upload (its request only scanned the file)."""
    if trace.source == TraceSource.UPLOAD and meta.get("source"):
        return str(meta["source"])[:16]
    return trace.raw_format


def chrome_ready(trace: Trace) -> bool:
    return trace.status == TraceStatus.READY and TraceFiles(trace.pk).exists(CHROME)


# -- timeouts --------------------------------------------------------------------------
def expire_stuck(now=None) -> int:
    """Fail every trace that has stayed in a state longer than that state allows."""
    now = now or timezone.now()
    expired = 0
    queue_limit = now - timedelta(seconds=settings.TRACE_QUEUE_TIMEOUT_S)
    for trace_id in Trace.objects.filter(status=TraceStatus.QUEUED, status_changed_at__lt=queue_limit).values_list("pk", flat=True):
        expired += fail(trace_id, f"no trace worker took it within {settings.TRACE_QUEUE_TIMEOUT_S} s", [TraceStatus.QUEUED])
    for trace in Trace.objects.filter(status=TraceStatus.CAPTURING):
        limit = trace.params.get("duration_s", MAX_CAPTURE_S) + CAPTURE_GRACE_S
        if trace.status_changed_at < now - timedelta(seconds=limit):
            expired += fail(trace.pk, f"the capture did not finish within {human_duration(limit)}", [TraceStatus.CAPTURING])
    analysis_limit = now - timedelta(seconds=settings.TRACE_ANALYSIS_TIMEOUT_S)
    for trace_id in Trace.objects.filter(status=TraceStatus.ANALYSING, status_changed_at__lt=analysis_limit).values_list("pk", flat=True):
        expired += fail(trace_id, f"the analysis did not finish within {settings.TRACE_ANALYSIS_TIMEOUT_S} s", [TraceStatus.ANALYSING])
    return expired


def _enqueue(task_name: str, trace_id: int, limit_s: float) -> None:
    """Queue the trace's task; if the broker cannot take it, the trace fails saying so (it
    would otherwise wait for its queue timeout) and the caller sees the broker's error."""
    try:
        queueing.send(task_name, trace_id, limit_s)
    except BrokerUnavailable as exc:
        fail(trace_id, f"could not be queued: the task broker is not answering ({exc})")
        raise


def _enqueue_capture(trace_id: int) -> None:
    _enqueue(queueing.CAPTURE_TASK, trace_id, MAX_CAPTURE_S + CAPTURE_GRACE_S)


def _enqueue_to(queue: str, task_name: str, trace_id: int) -> None:
    try:
        queueing.send(task_name, trace_id, MAX_CAPTURE_S + CAPTURE_GRACE_S, queue=queue)
    except BrokerUnavailable as exc:
        fail(trace_id, f"could not be queued: the task broker is not answering ({exc})")
        raise


def _enqueue_analysis(trace_id: int) -> None:
    _enqueue(queueing.ANALYSIS_TASK, trace_id, settings.TRACE_ANALYSIS_TIMEOUT_S)
