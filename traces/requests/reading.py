"""Reading a trace's joined requests for the pages and the API: from the stored join, the
request spans in the database and the trace's stored timeline (never the raw trace)."""

from __future__ import annotations

import math
from typing import Any

from traces.requests.models import RequestSpan
from traces.requests.service import stored_join
from traces.store import page_data

DEFAULT_ROWS = 100
MAX_ROWS = 10_000
MARGIN = 0.05  # of the request's span, either side, in the timeline under it
MAX_BINS = 40  # of the latency histogram


class NotJoined(Exception):
    """The trace's requests cannot be joined; the message says why."""


class UnknownRequest(LookupError):
    pass


def _joined(trace) -> dict[str, Any]:
    doc = stored_join(trace)
    if doc.get("error"):
        raise NotJoined(doc["error"])
    return doc


def summary(trace, query=None) -> dict[str, Any]:
    query = query or {}
    raw = query.get("limit", DEFAULT_ROWS)
    try:
        limit = int(raw)
    except (TypeError, ValueError):
        raise page_data.BadRequest(f"limit must be an integer, not {raw!r}") from None
    if not 0 <= limit <= MAX_ROWS:
        raise page_data.BadRequest(f"limit must be between 0 and {MAX_ROWS}, not {limit}")
    doc = _joined(trace)
    rows = sorted(doc["rows"], key=lambda r: -r["latency_ms"])[:limit]
    histogram = latency_histogram([r["latency_ms"] for r in doc["rows"]])
    return {k: v for k, v in doc.items() if k not in ("rows", "stamp")} | {
        "rows": rows, "trace": trace.pk, "latency_histogram": histogram}


def latency_histogram(latencies_ms: list[float], max_bins: int = MAX_BINS) -> dict[str, list]:
    """Every request's latency in equal bins from 0 to the slowest (about √n of them, at most
    ``max_bins``): ``{"edges_ms": [n + 1 edges], "counts": [n]}``; the tail shows at a glance."""
    if not latencies_ms:
        return {"edges_ms": [], "counts": []}
    top = max(latencies_ms)
    bins = max(1, min(max_bins, math.ceil(math.sqrt(len(latencies_ms))))) if top > 0 else 1
    width = top / bins if top > 0 else 1.0
    counts = [0] * bins
    for value in latencies_ms:
        counts[min(int(value / width), bins - 1)] += 1
    return {"edges_ms": [round(i * width, 3) for i in range(bins + 1)], "counts": counts}


def _find(doc: dict, request_id: str) -> dict[str, Any]:
    for w in doc["worst"]:
        if w["request_id"] == request_id:
            return w
    for r in doc["rows"]:
        if r["request_id"] == request_id:
            return r
    raise UnknownRequest(f"no request {request_id!r} among the {doc['requests']} of this trace")


def spans_of_request(trace, otel_trace_id: str) -> list[dict[str, Any]]:
    rows = sorted(RequestSpan.objects.filter(trace=trace, otel_trace_id=otel_trace_id),
                  key=lambda s: (bool(s.parent_span_id), s.start_ns, s.id))  # the root first
    return [{"span_id": s.span_id, "parent_span_id": s.parent_span_id, "name": s.name, "start_ns": s.start_ns,
             "end_ns": s.end_ns, "service": s.service, "attributes": s.attributes} for s in rows]


def detail(trace, request_id: str, query=None) -> dict[str, Any]:
    """One request: its row (with cause, kernels and health where stored), its spans, and the
    trace's timeline over its time (steps and kernels), on the trace's clock."""
    query = query or {}
    doc = _joined(trace)
    row = _find(doc, request_id)
    offset = int(doc["join"]["clock_offset_ns"])
    start, end = row["start_ns"], row["end_ns"]
    margin = max(int((end - start) * MARGIN), 1000)
    window = {"start_us": (start - margin - offset) / 1000, "end_us": (end + margin - offset) / 1000,
              "width_px": query.get("width_px", 1600)}
    return {
        "trace": trace.pk, "request": row, "join": doc["join"], "latency_ms": doc["latency_ms"],
        "spans": spans_of_request(trace, row["otel_trace_id"]),
        "clock_offset_ns": offset, "timeline": page_data.timeline(trace, window),
    }


def find_row(trace, request_id: str) -> dict[str, Any]:
    """The stored row of one request (with its cause and details where the join kept them),
    and where the trace's timeline shows it (``window_us``, on the trace's clock)."""
    doc = _joined(trace)
    row = dict(_find(doc, request_id))
    offset = int(doc["join"]["clock_offset_ns"])
    margin = max(int((row["end_ns"] - row["start_ns"]) * MARGIN), 1000)
    row["window_us"] = [(row["start_ns"] - margin - offset) / 1000, (row["end_ns"] + margin - offset) / 1000]
    row["join"], row["capture_latency_ms"] = doc["join"], doc["latency_ms"]
    return row
