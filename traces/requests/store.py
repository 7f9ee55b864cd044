"""Writing and reading request spans: the one place that knows the RequestSpan table."""

from __future__ import annotations

import time
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from traces.atrace.io.otlp import SpanRow
from traces.requests.models import RequestSpan

_BATCH = 2000
_PRUNE_EVERY_S = 60.0
_last_prune = 0.0


def _row(span: SpanRow, owner: int, trace_id: int | None) -> RequestSpan:
    return RequestSpan(
        otel_trace_id=span.trace_id, span_id=span.span_id, parent_span_id=span.parent_span_id,
        name=span.name[:255], service=span.service[:255], request_id=span.request_id[:255],
        device_serial=str(span.resource.get("asicmon.device.serial", ""))[:160],
        start_ns=span.start_ns, end_ns=max(span.end_ns, span.start_ns), kind=span.kind,
        status_code=span.status_code, attributes=span.attributes, resource=span.resource,
        owner=owner, trace_id=trace_id,
    )


def store_spans(spans: list[SpanRow], *, trace=None) -> int:
    """Keep ``spans`` (beside ``trace`` when given, else in the live window); a span
    already kept for the same owner is not written twice. Returns how many were given."""
    owner = trace.pk if trace is not None else 0
    rows = [_row(s, owner, owner or None) for s in spans]
    with transaction.atomic():
        for i in range(0, len(rows), _BATCH):
            RequestSpan.objects.bulk_create(rows[i : i + _BATCH], ignore_conflicts=True)
    if trace is None:
        prune_now_and_then()
    return len(rows)


def prune_expired(now=None) -> int:
    """Delete live spans older than the retention window that no trace holds."""
    cutoff = (now or timezone.now()) - timedelta(hours=settings.SPAN_RETENTION_HOURS)
    deleted, _ = RequestSpan.objects.filter(trace__isnull=True, received_at__lt=cutoff).delete()
    return deleted


def prune_now_and_then() -> None:
    """Prune at most once a minute per process (the receiver calls this after each batch)."""
    global _last_prune
    now = time.monotonic()
    if now - _last_prune >= _PRUNE_EVERY_S:
        _last_prune = now
        prune_expired()


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


def spans_for_trace(trace) -> list[SpanRow]:
    """The spans joined to ``trace``: uploaded beside it or attached from its window."""
    if trace.capture_started_at is not None:
        attach_window(trace)
    fields = ("otel_trace_id", "span_id", "parent_span_id", "name", "start_ns", "end_ns", "kind",
              "status_code", "service", "attributes", "resource")
    return [
        SpanRow(trace_id=r[0], span_id=r[1], parent_span_id=r[2], name=r[3], start_ns=r[4], end_ns=r[5],
                kind=r[6], status_code=r[7], service=r[8], attributes=r[9], resource=r[10])
        for r in RequestSpan.objects.filter(trace=trace).order_by("start_ns", "id").values_list(*fields)
    ]
