"""OpenTelemetry spans in and out: OTLP/HTTP bodies and the Collector's file format.

Decoding goes through ``opentelemetry-proto``'s generated ``ExportTraceServiceRequest``,
never a hand-written parser:

* ``application/x-protobuf``: the binary message, as the SDKs' and the Collector's
  ``otlphttp`` exporters send by default;
* ``application/json``: OTLP's JSON mapping (lowerCamelCase keys, enums as integers, trace
  and span ids as *hex* strings, not protobuf's base64). Ids are turned into base64 before
  ``json_format`` reads the rest; unknown fields are ignored, as the spec asks;
* the Collector's file exporter writes one such JSON request per line (:func:`read_otlp_json`).

Each span comes out as a flat :class:`SpanRow`: ids in hex, times in epoch nanoseconds, its
attributes and its resource's as plain dicts, and the request id it names (``gen_ai.request.id``
and the other names the serving engines use).
"""

from __future__ import annotations

import base64
import gzip
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
from google.protobuf import json_format
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from traces.atrace.errors import TraceFormatError

__all__ = [
    "OtlpError", "SpanRow", "decode_body", "decompress", "spans_of", "request_to_json",
    "read_otlp_json", "REQUEST_ID_KEYS", "PROTOBUF", "JSON",
]

PROTOBUF = "application/x-protobuf"
JSON = "application/json"
#: Attribute names that carry a request's id, in the order they are looked for (rid: SGLang's).
REQUEST_ID_KEYS = ("gen_ai.request.id", "gen_ai.response.id", "request.id", "request_id", "rid")
_ID_FIELDS = ("traceId", "spanId", "parentSpanId")


class OtlpError(TraceFormatError):
    """A body that is not a valid OTLP traces request; the message says why."""


@dataclass
class SpanRow:
    """One span, flattened."""

    trace_id: str
    span_id: str
    parent_span_id: str
    name: str
    start_ns: int
    end_ns: int
    kind: int = 0
    status_code: int = 0
    service: str = ""
    attributes: dict[str, Any] = field(default_factory=dict)
    resource: dict[str, Any] = field(default_factory=dict)

    @property
    def request_id(self) -> str:
        for key in REQUEST_ID_KEYS:
            value = self.attributes.get(key)
            if value not in (None, ""):
                return str(value)
        return ""

    @property
    def duration_ns(self) -> int:
        return max(self.end_ns - self.start_ns, 0)

    def to_dict(self) -> dict[str, Any]:
        return {
            "trace_id": self.trace_id, "span_id": self.span_id, "parent_span_id": self.parent_span_id,
            "name": self.name, "start_ns": self.start_ns, "end_ns": self.end_ns, "kind": self.kind,
            "status_code": self.status_code, "service": self.service, "attributes": self.attributes,
            "resource": self.resource,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> SpanRow:
        return cls(**{k: d[k] for k in cls.__dataclass_fields__ if k in d})


# -- bodies ------------------------------------------------------------------------------
def decompress(body: bytes, encoding: str, limit: int) -> bytes:
    """The body without its Content-Encoding (gzip, deflate or none), at most ``limit``
    bytes once inflated (a small bomb must not become a large allocation)."""
    encoding = (encoding or "identity").strip().lower()
    if encoding in ("", "identity"):
        return body
    if encoding not in ("gzip", "deflate"):
        raise OtlpError(f"Content-Encoding {encoding!r} is not supported; send gzip, deflate or none.")
    wbits = 16 + zlib.MAX_WBITS if encoding == "gzip" else zlib.MAX_WBITS
    inflater = zlib.decompressobj(wbits)
    try:
        out = inflater.decompress(body, limit + 1)
    except zlib.error as exc:
        raise OtlpError(f"the body is not valid {encoding} data ({exc})") from None
    if len(out) > limit:
        raise OtlpError(f"the body inflates to more than {limit} bytes, the limit")
    if not inflater.eof:
        raise OtlpError(f"the {encoding} body is truncated")
    return out


def decode_body(body: bytes, content_type: str, rejected: list[str] | None = None) -> ExportTraceServiceRequest:
    """An ``ExportTraceServiceRequest`` from an OTLP/HTTP body of ``content_type``. With
    ``rejected``, a JSON span whose ids are not hex is left out and said there (else the
    whole body is refused)."""
    media = (content_type or "").split(";")[0].strip().lower()
    if media == PROTOBUF:
        message = ExportTraceServiceRequest()
        try:
            message.ParseFromString(body)
        except DecodeError as exc:
            raise OtlpError(f"the body is not a protobuf ExportTraceServiceRequest ({exc})") from None
        return message
    if media == JSON:
        try:
            data = orjson.loads(body)
        except orjson.JSONDecodeError as exc:
            raise OtlpError(f"the body is not JSON ({exc})") from None
        return _from_json(data, rejected)
    raise OtlpError(f"Content-Type {content_type!r} is not OTLP; send {PROTOBUF} or {JSON}.")


def _from_json(data: Any, rejected: list[str] | None = None) -> ExportTraceServiceRequest:
    if not isinstance(data, dict):
        raise OtlpError("the JSON body must be an object with 'resourceSpans'")
    for resource_spans in _list(data.get("resourceSpans", data.get("resource_spans"))):
        for scope_spans in _list(_get(resource_spans, "scopeSpans", "scope_spans")):
            spans = _list(_get(scope_spans, "spans"))
            kept = []
            for span in spans:
                try:
                    _hex_ids_to_base64(span)
                    for link in _list(_get(span, "links")):
                        _hex_ids_to_base64(link)
                except OtlpError as exc:
                    if rejected is None or not isinstance(span, dict):
                        raise
                    rejected.append(f"span {str(span.get('name', ''))[:80]!r}: {exc}")
                    continue
                kept.append(span)
            if len(kept) != len(spans):
                scope_spans["spans"] = kept
    message = ExportTraceServiceRequest()
    try:
        json_format.ParseDict(data, message, ignore_unknown_fields=True)
    except json_format.ParseError as exc:
        raise OtlpError(f"the JSON body is not an OTLP traces request ({exc})") from None
    return message


def _get(obj: Any, *keys: str) -> Any:
    if not isinstance(obj, dict):
        raise OtlpError(f"expected an object, found {type(obj).__name__}")
    return next((obj[k] for k in keys if k in obj), None)


def _list(value: Any) -> list:
    if value is None:
        return []
    if not isinstance(value, list):
        raise OtlpError(f"expected a list, found {type(value).__name__}")
    return value


def _hex_ids_to_base64(obj: Any) -> None:
    if not isinstance(obj, dict):
        raise OtlpError(f"expected a span or link object, found {type(obj).__name__}")
    for key in (*_ID_FIELDS, "trace_id", "span_id", "parent_span_id"):
        value = obj.get(key)
        if isinstance(value, str) and value:
            try:
                raw = bytes.fromhex(value)
            except ValueError:
                raise OtlpError(f"{key} {value[:40]!r} is not hex (OTLP JSON writes ids in hex)") from None
            obj[key] = base64.b64encode(raw).decode()


# -- spans -------------------------------------------------------------------------------
def _value(v) -> Any:
    which = v.WhichOneof("value")
    if which is None:
        return None
    if which == "array_value":
        return [_value(x) for x in v.array_value.values]
    if which == "kvlist_value":
        return {kv.key: _value(kv.value) for kv in v.kvlist_value.values}
    if which == "bytes_value":
        return v.bytes_value.hex()
    return getattr(v, which)


_SCALARS = frozenset({"string_value", "int_value", "double_value", "bool_value"})


def _attrs(kvs) -> dict[str, Any]:
    out = {}
    for kv in kvs:  # the receiver's hot loop: scalars without a call each
        v = kv.value
        which = v.WhichOneof("value")
        out[kv.key] = getattr(v, which) if which in _SCALARS else _value(v)
    return out


#: The values a span may hold (OTLP's enums; times kept as signed 64-bit nanoseconds).
SPAN_KINDS = range(0, 6)  # UNSPECIFIED, INTERNAL, SERVER, CLIENT, PRODUCER, CONSUMER
STATUS_CODES = range(0, 3)  # UNSET, OK, ERROR
MAX_NS = 2**63 - 1


def _has_nul(value: Any) -> bool:
    """Text the store cannot keep (PostgreSQL's text and jsonb hold no NUL character)."""
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, list):
        return any(_has_nul(v) for v in value)
    if isinstance(value, dict):
        return any(_has_nul(k) or _has_nul(v) for k, v in value.items())
    return False


def span_problem(s, attributes: dict) -> str:
    """Why a span cannot be kept, or "" (ids, enums and times out of range, text with NUL)."""
    if len(s.trace_id) != 16 or len(s.span_id) != 8 or len(s.parent_span_id) not in (0, 8):
        return "a malformed trace or span id (16 and 8 bytes)"
    if not any(s.trace_id) or not any(s.span_id):
        return "an all-zero trace or span id (OTLP: invalid)"
    if s.kind not in SPAN_KINDS:
        return f"kind {s.kind} is not a span kind (0-5)"
    if s.status.code not in STATUS_CODES:
        return f"status code {s.status.code} is not one of 0 (unset), 1 (ok), 2 (error)"
    start, end = s.start_time_unix_nano, s.end_time_unix_nano
    if not 0 < start <= MAX_NS or not 0 < end <= MAX_NS:
        return f"its times ({start}, {end} ns) are not Unix nanoseconds in range"
    if end < start:
        return f"it ends {start - end} ns before it starts"
    if _has_nul(s.name) or _has_nul(attributes):
        return "its name or an attribute holds a NUL character"
    return ""


def spans_of(message: ExportTraceServiceRequest, rejected: list[str] | None = None) -> list[SpanRow]:
    """Every span of a request, flattened. A span that cannot be kept (:func:`span_problem`)
    raises OtlpError, or with ``rejected`` is left out and said there."""
    rows = []
    for resource_spans in message.resource_spans:
        resource = _attrs(resource_spans.resource.attributes)
        service = str(resource.get("service.name", ""))
        bad_resource = "its resource holds a NUL character" if _has_nul(resource) else ""
        for scope_spans in resource_spans.scope_spans:
            for s in scope_spans.spans:
                attributes = _attrs(s.attributes)
                problem = bad_resource or span_problem(s, attributes)
                if problem:
                    text = f"span {s.name[:80]!r}: {problem}"
                    if rejected is None:
                        raise OtlpError(text)
                    rejected.append(text)
                    continue
                rows.append(SpanRow(  # positional, in the fields' order: a tenth faster than by name
                    s.trace_id.hex(), s.span_id.hex(), s.parent_span_id.hex(), s.name, s.start_time_unix_nano,
                    s.end_time_unix_nano, s.kind, s.status.code, service, attributes, resource,
                ))
    return rows


def request_to_json(message: ExportTraceServiceRequest) -> bytes:
    """One request in OTLP's JSON mapping (hex ids), on one line: the file exporter's format."""
    data = json_format.MessageToDict(message, use_integers_for_enums=True)
    for resource_spans in data.get("resourceSpans", []):
        for scope_spans in resource_spans.get("scopeSpans", []):
            for span in scope_spans.get("spans", []):
                for obj in (span, *span.get("links", [])):
                    for key in _ID_FIELDS:
                        if obj.get(key):
                            obj[key] = base64.b64decode(obj[key]).hex()
    return orjson.dumps(data)


def _lines(path: Path) -> Iterator[bytes]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as fh:
        yield from fh


def read_otlp_json(source: Path | str | Iterable[bytes]) -> list[SpanRow]:
    """The spans of a file in the Collector's file exporter format (one JSON request per
    line, gzipped or not); a pretty-printed document (one request, or a JSON array of them)
    is accepted too."""
    lines = iter(_lines(Path(source)) if isinstance(source, (str, Path)) else source)
    rows: list[SpanRow] = []
    for number, line in enumerate(lines, 1):
        text = line.strip()
        if not text:
            continue
        try:
            data = orjson.loads(text)
        except orjson.JSONDecodeError:
            if number == 1 and text[:1] in (b"[", b"{"):
                return _whole_document(line + b"".join(lines))
            raise OtlpError(f"line {number} is not JSON") from None
        rows.extend(_requests_of(data, f"line {number}"))
    return rows


def _requests_of(data: Any, where: str) -> list[SpanRow]:
    out: list[SpanRow] = []
    for request in data if isinstance(data, list) else [data]:
        try:
            out.extend(spans_of(_from_json(request)))
        except OtlpError as exc:
            raise OtlpError(f"{where}: {exc}") from None
    return out


def _whole_document(blob: bytes) -> list[SpanRow]:
    """A file that is one JSON document over many lines."""
    try:
        data = orjson.loads(blob)
    except orjson.JSONDecodeError as exc:
        raise OtlpError(f"the file is neither JSON lines nor one JSON document ({exc})") from None
    return _requests_of(data, "the document")
