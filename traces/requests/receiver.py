"""POST /v1/traces: the OTLP/HTTP receiver.

Answers as the OTLP/HTTP specification says: 200 with an ``ExportTraceServiceResponse`` in
the request's own encoding; a span that cannot be kept (a malformed id, a kind, status or time
out of range, text the store cannot hold) is left out and counted in the answer's
``partial_success`` (``rejected_spans`` and a message) while the rest are kept; a bad body
400 with a ``google.rpc.Status`` saying why (nothing of it is kept); 413 past OTLP_MAX_BODY_MB; 415 for a content type that is not OTLP; 401
without the bearer token (OTLP_TOKEN), 503 while no token is set. Nothing is read from the
body before the token is checked and the declared length is within the limit.
"""

from __future__ import annotations

import hmac
import logging

from django.conf import settings
from django.http import HttpResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST
from google.protobuf import json_format
from google.rpc.status_pb2 import Status
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTracePartialSuccess,
    ExportTraceServiceResponse,
)

from traces.atrace.io.otlp import JSON, PROTOBUF, OtlpError, decode_body, decompress, spans_of
from traces.requests.store import store_spans

log = logging.getLogger(__name__)

INVALID_ARGUMENT, UNAUTHENTICATED, RESOURCE_EXHAUSTED, UNAVAILABLE = 3, 16, 8, 14
OFF_MESSAGE = "The OTLP receiver is off: set OTLP_TOKEN and send it as 'Authorization: Bearer <OTLP_TOKEN>'."


def _media(request) -> str:
    media = request.content_type.lower()
    return media if media in (PROTOBUF, JSON) else JSON


def _answer(request, message, status: int) -> HttpResponse:
    if _media(request) == PROTOBUF:
        return HttpResponse(message.SerializeToString(), status=status, content_type=PROTOBUF)
    body = json_format.MessageToJson(message, indent=None, use_integers_for_enums=True)
    return HttpResponse(body, status=status, content_type=JSON)


def _status(request, status: int, code: int, message: str) -> HttpResponse:
    return _answer(request, Status(code=code, message=message), status)


def _authorized(request) -> bool:
    scheme, _, credentials = request.headers.get("Authorization", "").partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(
        credentials.strip().encode(), settings.OTLP_TOKEN.encode()
    )


def _read_body(request, limit: int) -> bytes:
    declared = request.headers.get("Content-Length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise OverflowError(f"the body is {int(declared)} bytes; at most {limit} are accepted")
    body = request.read(limit + 1)
    if len(body) > limit:
        raise OverflowError(f"the body is over {limit} bytes, the limit")
    return body


@csrf_exempt
@require_POST
def receive_traces(request):
    if not settings.OTLP_TOKEN:
        return _status(request, 503, UNAVAILABLE, OFF_MESSAGE)
    if not _authorized(request):
        response = _status(request, 401, UNAUTHENTICATED, "A valid 'Authorization: Bearer <OTLP_TOKEN>' header is required.")
        response["WWW-Authenticate"] = 'Bearer realm="otlp"'
        return response
    if request.content_type.lower() not in (PROTOBUF, JSON):
        return _status(request, 415, INVALID_ARGUMENT,
                       f"Content-Type {request.content_type!r} is not OTLP; send {PROTOBUF} or {JSON}.")
    limit = int(settings.OTLP_MAX_BODY_MB * 1024 * 1024)
    try:
        body = _read_body(request, limit)
        body = decompress(body, request.headers.get("Content-Encoding", ""), limit)
        rejected: list[str] = []
        spans = spans_of(decode_body(body, request.content_type, rejected), rejected)
    except OverflowError as exc:
        return _status(request, 413, RESOURCE_EXHAUSTED, str(exc))
    except OtlpError as exc:
        if "inflates to more than" in str(exc):
            return _status(request, 413, RESOURCE_EXHAUSTED, str(exc))
        return _status(request, 400, INVALID_ARGUMENT, str(exc))
    if spans:
        store_spans(spans)
    if rejected:
        log.info("OTLP: %d spans rejected, %d kept; first: %s", len(rejected), len(spans), rejected[0])
        return _answer(request, ExportTraceServiceResponse(partial_success=ExportTracePartialSuccess(
            rejected_spans=len(rejected), error_message=_rejected_words(rejected, len(spans)))), 200)
    return _answer(request, ExportTraceServiceResponse(), 200)


def _rejected_words(rejected: list[str], kept: int, shown: int = 3) -> str:
    more = f"; and {len(rejected) - shown} more" if len(rejected) > shown else ""
    return f"{len(rejected)} spans rejected, {kept} kept: " + "; ".join(rejected[:shown]) + more
