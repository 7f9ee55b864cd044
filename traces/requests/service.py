"""Request spans beside traces: uploads, and the join of a trace's requests to its steps."""

from __future__ import annotations

from django.conf import settings

from traces.atrace.io.otlp import OtlpError, read_otlp_json
from traces.requests.store import store_spans


class TooLarge(Exception):
    """An upload over SPAN_UPLOAD_MAX_MB."""


def upload_spans(trace, upload) -> int:
    """Keep the spans of an uploaded OTLP JSON file beside ``trace``; nothing is kept when
    any line is bad. Returns how many spans the file held."""
    limit = int(settings.SPAN_UPLOAD_MAX_MB * 1024 * 1024)
    if upload.size > limit:
        raise TooLarge(f"The spans file is {upload.size} bytes; at most {limit} are accepted.")
    head = upload.read(2)
    upload.seek(0)
    if head == b"\x1f\x8b":
        import gzip

        lines = gzip.GzipFile(fileobj=upload)
    else:
        lines = upload
    try:
        spans = read_otlp_json(lines)
    except (OSError, EOFError) as exc:
        raise OtlpError(f"the gzip file is damaged ({exc})") from None
    if not spans:
        raise OtlpError("the file holds no spans")
    return store_spans(spans, trace=trace)
