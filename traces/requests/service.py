"""Request spans beside traces: uploads, the join of a trace's requests to its engine steps
(computed once in a trace worker and stored beside the trace's analyses), and reading it.

The stored join carries a stamp of the spans it was made from; when spans arrive later (a
new upload, or live spans attached from the capture window), the next read queues a new
join and answers "joining" meanwhile.
"""

from __future__ import annotations

import gzip
import logging
import zlib
from datetime import timedelta
from typing import Any

import numpy as np
import orjson
from django.conf import settings
from django.db.models import Count, Max

from fleet.reading import history
from traces import atrace
from traces.atrace.analysis.requests.report import Health, analyse_requests
from traces.atrace.io.otlp import OtlpError, read_otlp_json
from traces.choices import TraceStatus
from traces.models import Trace
from traces.requests.models import RequestSpan
from traces.requests.store import attach_window, spans_for_trace, store_spans
from traces.store.files import TraceFiles, store_errors

log = logging.getLogger(__name__)

STORED = "requests.json"
JOIN_TASK = "traces.tasks.join_requests"
JOIN_LIMIT_S = 300
RETRY_AFTER_S = 5  # what an answer asks a reader to wait while an unreadable join is made again
HEALTH_COUNTERS = ("temperature_c", "clock_mhz", "clock_max_mhz")


class TooLarge(Exception):
    """An upload over SPAN_UPLOAD_MAX_MB."""


class Pending(Exception):
    """The join is being computed (or cannot be yet); the message says which."""


class Unreadable(Pending):
    """The stored join could not be read; a new one is queued (answered 503, Retry-After)."""


def upload_spans(trace, upload) -> int:
    """Keep the spans of an uploaded OTLP JSON file beside ``trace``; nothing is kept when
    any line is bad. Returns how many spans the file held."""
    return store_spans(_read_upload(upload), trace=trace)


def _read_upload(upload) -> list:
    """The spans of an uploaded OTLP JSON file (gzipped or not); OtlpError naming the bad
    line, TooLarge past SPAN_UPLOAD_MAX_MB as sent or once inflated (read in blocks: a small
    gzip bomb never becomes a large allocation)."""
    limit = int(settings.SPAN_UPLOAD_MAX_MB * 1024 * 1024)
    if upload.size > limit:
        raise TooLarge(f"The spans file is {upload.size} bytes; at most {limit} are accepted.")
    head = upload.read(2)
    upload.seek(0)
    stream = gzip.GzipFile(fileobj=upload) if head == b"\x1f\x8b" else upload
    try:
        spans = read_otlp_json(bounded_lines(stream, limit))
    except (OSError, EOFError, zlib.error) as exc:
        raise OtlpError(f"the gzip file is damaged ({exc})") from None
    if not spans:
        raise OtlpError("the file holds no spans")
    return spans


READ_BLOCK = 1 << 16


def bounded_lines(stream, limit: int, block: int = READ_BLOCK):
    """The lines of ``stream`` (a file, or a gzip file inflating as it is read), read
    ``block`` bytes at a time; TooLarge once more than ``limit`` bytes came out."""
    total = 0
    pending = bytearray()
    while chunk := stream.read(block):
        total += len(chunk)
        if total > limit:
            raise TooLarge(f"The spans file inflates to more than {limit} bytes, the limit (SPAN_UPLOAD_MAX_MB).")
        pending += chunk
        cut = pending.rfind(b"\n")
        if cut >= 0:
            yield from bytes(pending[:cut]).split(b"\n")
            del pending[: cut + 1]
    if pending:
        yield bytes(pending)


def upload_job_spans(job, upload) -> tuple[int, int]:
    """Keep the spans of an OTLP JSON file beside every rank's trace of ``job`` (a request
    served by a job ran on all its ranks); returns (spans, ranks)."""
    from django.db import transaction

    traces = [rank.trace for rank in job.ranks.select_related("trace") if rank.trace is not None]
    if not traces:
        raise OtlpError("the job has no rank traces to keep spans beside")
    spans = _read_upload(upload)
    with transaction.atomic():
        for trace in traces:
            store_spans(spans, trace=trace)
    return len(spans), len(traces)


def span_stamp(trace) -> str:
    """What the spans of ``trace`` are now (count and newest row), to know a stored join is
    current. Reads only: live spans are attached by a periodic task and by the join."""
    found = RequestSpan.objects.filter(trace=trace).aggregate(n=Count("id"), last=Max("id"))
    return f"{found['n']}:{found['last'] or 0}"


# -- the join (in a trace worker) -----------------------------------------------------------
def _health(trace, spans) -> Health | None:
    """The device's temperature and clock over the requests' span, from the time-series store."""
    if not trace.device_id or not spans:
        return None
    start = min(s.start_ns for s in spans) / 1e9
    end = max(s.end_ns for s in spans) / 1e9
    from datetime import UTC, datetime

    since = datetime.fromtimestamp(start, UTC) - timedelta(seconds=settings.POLL_INTERVAL * 2)
    until = datetime.fromtimestamp(end, UTC) + timedelta(seconds=settings.POLL_INTERVAL)
    try:
        found = history.read(trace.device_id, list(HEALTH_COUNTERS), since, until)
    except history.TsdbError as exc:
        log.warning("no device health for the requests of trace %s: %s", trace.pk, exc)
        return None
    temps = found.get("temperature_c") or []
    if not temps:
        return None
    clocks = dict(found.get("clock_mhz") or [])
    peak = max((v for _, v in found.get("clock_max_mhz") or []), default=0.0)
    ts = np.array([int(t * 1e9) for t, _ in temps], np.int64)
    share = np.array([clocks[t] / peak if peak and t in clocks else np.nan for t, _ in temps])
    return Health(ts, np.array([v for _, v in temps], float), share)


def join_requests(trace_id: int) -> None:
    """Join the spans of a ready trace to its steps and store the result (or why not)."""
    trace = Trace.objects.filter(pk=trace_id, status=TraceStatus.READY).first()
    if trace is None:
        return
    if trace.capture_started_at is not None:  # the live spans of its window not attached yet
        attach_window(trace)
    stamp = span_stamp(trace)
    spans = spans_for_trace(trace)
    files = TraceFiles(trace.pk)
    doc: dict[str, Any] = {"stamp": stamp}
    if not spans:
        doc["error"] = "No request spans were sent or uploaded for this trace."
    else:
        try:
            with files.storage.open(trace.raw_file, "rb") as fh:
                parsed = atrace.read_trace(fh)
            health = _health(trace, spans)
            doc.update(analyse_requests(parsed, spans, health=health))
            doc["health_source"] = "time-series store" if health is not None else "trace counters"
        except atrace.TraceError as exc:
            doc["error"] = str(exc)
    files.save(STORED, orjson.dumps(doc, option=orjson.OPT_SERIALIZE_NUMPY))
    from django.core.cache import cache

    # Joined: a page that finds this join unreadable later queues the next one at once.
    cache.delete_many([_join_key(trace, stamp, False), _join_key(trace, stamp, True)])


def _join_key(trace, stamp: str, unreadable: bool) -> str:
    """One join queued per trace and state of its spans, however often the page asks meanwhile
    (the trace's creation in the key: a test database that gives an id again is another trace)."""
    return f"requests-join:{trace.pk}:{trace.created_at.timestamp()}:{stamp}{':unreadable' if unreadable else ''}"


def stored_join(trace) -> dict[str, Any]:
    """The stored join of ``trace`` if it is current; else queue one and raise Pending
    (Unreadable when the stored one cannot be read: a new one replaces it)."""
    if trace.status != TraceStatus.READY:
        raise Pending(f"the trace is {trace.status}; its requests are joined once it is ready")
    files = TraceFiles(trace.pk)
    stamp = span_stamp(trace)
    unreadable = False
    if files.exists(STORED):
        doc = _read_stored(files)
        if doc is None:
            unreadable = True
        elif doc.get("stamp") == stamp:
            return doc
    # A capture's live spans may not be attached yet: its join attaches them (or says none came).
    if stamp.startswith("0:") and not unreadable and trace.capture_started_at is None:
        return {"stamp": stamp, "error": "No request spans were sent or uploaded for this trace."}
    from django.core.cache import cache

    from traces import queueing

    if cache.add(_join_key(trace, stamp, unreadable), 1, timeout=JOIN_LIMIT_S + 60):
        queueing.send(JOIN_TASK, trace.pk, JOIN_LIMIT_S)
    if unreadable:
        raise Unreadable("The stored join of this trace's requests could not be read (cut short or damaged); "
                         f"it is being joined again: ask again in {RETRY_AFTER_S} seconds.")
    raise Pending("joining the requests to the trace's steps; ask again in a few seconds")


def _read_stored(files: TraceFiles) -> dict[str, Any] | None:
    """The stored join, or None when it cannot be read whole (a file cut short by a crash, a
    damaged one, a store that failed the read)."""
    try:
        with files.open(STORED) as fh:
            doc = orjson.loads(fh.read())
    except (orjson.JSONDecodeError, *store_errors()) as exc:
        log.warning("the stored request join of trace %s is unreadable (%s); joining again", files.trace_id, exc)
        return None
    return doc if isinstance(doc, dict) and "stamp" in doc else None
