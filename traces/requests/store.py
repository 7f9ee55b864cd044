"""Writing and reading request spans: the one place that knows the RequestSpan table.

Its housekeeping is a periodic task's (traces.tasks.attach_request_spans and
prune_request_spans), never a request's: the receiver only inserts, a page only reads.
"""

from __future__ import annotations

from datetime import timedelta

import orjson
from django.conf import settings
from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone
from psycopg.errors import UniqueViolation

from traces.atrace.io.otlp import SpanRow
from traces.requests.models import RequestSpan

_BATCH = 1000  # rows a statement (16 parameters each: under every database's limit)
# How long after its end a capture still takes the live spans of its window (an exporter
# sends a batch seconds after its requests ended; its join attaches any later).
ATTACH_AFTER_CAPTURE = timedelta(minutes=10)
_COLUMNS = ("otel_trace_id", "span_id", "parent_span_id", "name", "service", "request_id", "device_serial",
            "start_ns", "end_ns", "kind", "status_code", "attributes", "resource", "owner", "received_at", "trace")
_JSON = {"attributes", "resource"}


def _values(span: SpanRow, owner: int, trace_id: int | None, now, resources: dict[int, str]) -> tuple:
    resource = resources.get(id(span.resource))  # the spans of one resource share its dict
    if resource is None:
        resource = resources[id(span.resource)] = orjson.dumps(span.resource).decode()
    return (
        span.trace_id, span.span_id, span.parent_span_id, span.name[:255], span.service[:255],
        span.request_id[:255], str(span.resource.get("asicmon.device.serial", ""))[:160],
        span.start_ns, max(span.end_ns, span.start_ns), span.kind, span.status_code,
        orjson.dumps(span.attributes).decode(), resource, owner, now, trace_id,
    )


def _insert_sql(rows: int) -> str:
    """One INSERT of ``rows`` rows that skips a span already kept for the same owner."""
    meta = RequestSpan._meta
    quote = connection.ops.quote_name
    columns = ", ".join(quote(meta.get_field(c).column) for c in _COLUMNS)
    cast = "::jsonb" if connection.vendor == "postgresql" else ""
    one = "(" + ", ".join(f"%s{cast}" if c in _JSON else "%s" for c in _COLUMNS) + ")"
    return f"INSERT INTO {quote(meta.db_table)} ({columns}) VALUES " + ", ".join([one] * rows) + " ON CONFLICT DO NOTHING"


def _copy(cursor, table: str, columns: str, rows: list[tuple]) -> None:
    """COPY ``rows`` into ``table``: psycopg formats each row in C (escapes, NULLs, times)."""
    with cursor.cursor.copy(f"COPY {table} ({columns}) FROM STDIN") as copy:
        for row in rows:
            copy.write_row(row)


def _copy_in(cursor, rows: list[tuple]) -> None:
    """PostgreSQL: COPY the rows straight into the table; when some were kept already (an
    exporter's retry), COPY into a session's scratch table instead and move the rows over
    with ON CONFLICT DO NOTHING (COPY itself cannot skip a conflict). A fifth of the cost of
    INSERTs."""
    quote = connection.ops.quote_name
    meta = RequestSpan._meta
    columns = ", ".join(quote(meta.get_field(c).column) for c in _COLUMNS)
    try:
        with transaction.atomic():  # a savepoint: a conflict undoes this COPY only
            _copy(cursor, quote(meta.db_table), columns, rows)
        return
    except UniqueViolation:
        pass
    cursor.execute(f"CREATE TEMP TABLE IF NOT EXISTS request_spans_in ON COMMIT DELETE ROWS AS "
                   f"SELECT {columns} FROM {quote(meta.db_table)} WITH NO DATA")
    _copy(cursor, "request_spans_in", columns, rows)
    cursor.execute(f"INSERT INTO {quote(meta.db_table)} ({columns}) SELECT {columns} FROM request_spans_in "
                   "ON CONFLICT DO NOTHING")
    cursor.execute("DELETE FROM request_spans_in")


def store_spans(spans: list[SpanRow], *, trace=None) -> int:
    """Keep ``spans`` (beside ``trace`` when given, else in the live window); a span
    already kept for the same owner is not written twice. Returns how many were given.

    Rows go in as multi-row INSERTs, no model instance a span: the receiver's hot path."""
    owner = trace.pk if trace is not None else 0
    now = timezone.now()
    resources: dict[int, str] = {}
    rows = [_values(s, owner, owner or None, now, resources) for s in spans]
    with transaction.atomic(), connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            _copy_in(cursor, rows)
        else:
            for i in range(0, len(rows), _BATCH):
                chunk = rows[i : i + _BATCH]
                cursor.execute(_insert_sql(len(chunk)), [v for row in chunk for v in row])
    return len(rows)


def prune_expired(now=None) -> int:
    """Delete live spans older than the retention window that no trace holds."""
    cutoff = (now or timezone.now()) - timedelta(hours=settings.SPAN_RETENTION_HOURS)
    deleted, _ = RequestSpan.objects.filter(trace__isnull=True, received_at__lt=cutoff).delete()
    return deleted


def capture_window_ns(trace) -> tuple[int, int] | None:
    """The epoch-ns window a captured trace covers, or None when it has none."""
    if trace.capture_started_at is None:
        return None
    end = trace.capture_ended_at or timezone.now()
    return int(trace.capture_started_at.timestamp() * 1e9), int(end.timestamp() * 1e9)


def attach_window(trace) -> int:
    """Attach to a captured ``trace`` the live spans of the requests that overlap its
    capture window (whole requests: every span of an OTel trace that has one in it)."""
    window = capture_window_ns(trace)
    if window is None:
        return 0
    live = RequestSpan.objects.filter(owner=0)
    if trace.device_id is not None:  # a service that names its device joins that device's traces only
        live = live.filter(Q(device_serial="") | Q(device_serial=trace.device.serial))
    ids = live.overlapping(*window).filter(trace__isnull=True).values("otel_trace_id").distinct()
    return live.filter(trace__isnull=True, otel_trace_id__in=ids).update(trace=trace)


def attach_to_recent_captures(now=None) -> int:
    """Attach the live spans of their windows to the captures running or ended within
    ATTACH_AFTER_CAPTURE (the periodic task's work); returns how many spans were attached.
    A failed capture takes none (one that died capturing has no end to its window)."""
    from traces.choices import TraceStatus
    from traces.models import Trace

    since = (now or timezone.now()) - ATTACH_AFTER_CAPTURE
    captures = (Trace.objects.filter(capture_started_at__isnull=False).exclude(status=TraceStatus.FAILED)
                .filter(Q(capture_ended_at__isnull=True) | Q(capture_ended_at__gte=since))
                .select_related("device").order_by("pk"))
    return sum(attach_window(trace) for trace in captures)


def spans_for_trace(trace) -> list[SpanRow]:
    """The spans joined to ``trace``: uploaded beside it or attached from its window."""
    fields = ("otel_trace_id", "span_id", "parent_span_id", "name", "start_ns", "end_ns", "kind",
              "status_code", "service", "attributes", "resource")
    return [
        SpanRow(trace_id=r[0], span_id=r[1], parent_span_id=r[2], name=r[3], start_ns=r[4], end_ns=r[5],
                kind=r[6], status_code=r[7], service=r[8], attributes=r[9], resource=r[10])
        for r in RequestSpan.objects.filter(trace=trace).order_by("start_ns", "id").values_list(*fields)
    ]
