"""POST /v1/traces through Django: protobuf, JSON and gzip bodies as the SDK encodes them,
bad bodies answered 400 with the reason and nothing kept, the size limit, the token."""

import gzip

import orjson
import pytest
from google.rpc.status_pb2 import Status
from opentelemetry.exporter.otlp.json.common._internal.trace_encoder import (
    encode_spans as encode_json,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from tests.support.otlp import protobuf_body, sdk_spans
from traces.requests.models import RequestSpan
from traces.requests.store import prune_expired

TOKEN = "otlp-s3cret"
PB, JS = "application/x-protobuf", "application/json"


@pytest.fixture
def receiver(settings, client):
    settings.OTLP_TOKEN = TOKEN

    def post(body: bytes, content_type=PB, token=TOKEN, **headers):
        if token is not None:
            headers["HTTP_AUTHORIZATION"] = f"Bearer {token}"
        return client.post("/v1/traces", data=body, content_type=content_type, **headers)

    return post


def _json_body(spans) -> bytes:
    """As the SDK's OTLP/HTTP JSON exporter encodes a batch."""
    return encode_json(spans).to_json().encode()


@pytest.mark.django_db
def test_protobuf_body_is_kept_with_ids_times_and_request_ids(receiver):
    spans = sdk_spans(3)
    response = receiver(protobuf_body(spans))
    assert response.status_code == 200
    assert response["Content-Type"] == PB
    ExportTraceServiceResponse().ParseFromString(response.content)
    rows = list(RequestSpan.objects.order_by("start_ns", "name"))
    assert len(rows) == 12
    roots = [r for r in rows if r.name == "llm_request"]
    assert [r.request_id for r in roots] == ["req-0", "req-1", "req-2"]
    assert {r.otel_trace_id for r in roots} == {format(s.context.trace_id, "032x") for s in spans}
    assert roots[0].service == "llm-server" and roots[0].resource["host.name"] == "node-1"
    assert roots[0].end_ns - roots[0].start_ns == 60_000_000
    children = [r for r in rows if r.otel_trace_id == roots[0].otel_trace_id and r.name != "llm_request"]
    assert {c.parent_span_id for c in children} == {roots[0].span_id}


@pytest.mark.django_db
def test_json_body_as_the_sdk_encodes_it_gives_the_same_spans(receiver):
    spans = sdk_spans(2)
    body = _json_body(spans)
    assert b'"traceId"' in body  # OTLP JSON, hex ids
    response = receiver(body, content_type=JS)
    assert response.status_code == 200, response.content
    assert response["Content-Type"] == JS
    ids = {(r.otel_trace_id, r.span_id) for r in RequestSpan.objects.all()}
    assert ids == {(format(s.context.trace_id, "032x"), format(s.context.span_id, "016x")) for s in spans}


@pytest.mark.django_db
def test_gzip_body_and_a_resend_keeps_each_span_once(receiver):
    body = gzip.compress(protobuf_body(sdk_spans(2)))
    assert receiver(body, HTTP_CONTENT_ENCODING="gzip").status_code == 200
    assert receiver(body, HTTP_CONTENT_ENCODING="gzip").status_code == 200
    assert RequestSpan.objects.count() == 8


@pytest.mark.django_db
@pytest.mark.parametrize(("body", "content_type", "encoding", "reason"), [
    (b"\x0a\xff\xff", PB, "", "not a protobuf"),
    (b"{not json", JS, "", "not JSON"),
    (b'{"resourceSpans": {"x": 1}}', JS, "", "expected a list"),
    (b'{"resourceSpans": [{"scopeSpans": [{"spans": [null]}]}]}', JS, "", "expected a span or link object"),
    (b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "00", "startTimeUnixNano": {"a": 1}}]}]}]}', JS, "",
     "not an OTLP traces request"),
    (b"plain", PB, "gzip", "not valid gzip"),
    (b"x", PB, "br", "not supported"),
])
def test_bad_bodies_get_400_with_the_reason_and_keep_nothing(receiver, body, content_type, encoding, reason):
    headers = {"HTTP_CONTENT_ENCODING": encoding} if encoding else {}
    response = receiver(body, content_type=content_type, **headers)
    assert response.status_code == 400
    if content_type == PB:
        status = Status()
        status.ParseFromString(response.content)
        message = status.message
    else:
        message = orjson.loads(response.content)["message"]
    assert reason in message
    assert not RequestSpan.objects.exists()


@pytest.mark.django_db
def test_other_content_types_get_415(receiver):
    response = receiver(b"hello", content_type="text/plain")
    assert response.status_code == 415
    assert "application/x-protobuf" in orjson.loads(response.content)["message"]


@pytest.mark.django_db
def test_bodies_over_the_limit_get_413_as_sent_and_once_inflated(receiver, settings):
    settings.OTLP_MAX_BODY_MB = 0.01  # 10 KiB
    big = protobuf_body(sdk_spans(60))
    assert len(big) > 10 * 1024
    assert receiver(big).status_code == 413
    bomb = gzip.compress(big + b"\x00" * 200_000)
    assert len(bomb) < 10 * 1024
    response = receiver(bomb, HTTP_CONTENT_ENCODING="gzip")
    assert response.status_code == 413
    assert not RequestSpan.objects.exists()


@pytest.mark.django_db
def test_the_token_is_required_and_an_unset_token_turns_the_receiver_off(receiver, settings):
    body = protobuf_body(sdk_spans(1))
    assert receiver(body, token=None).status_code == 401
    assert receiver(body, token="wrong").status_code == 401
    settings.OTLP_TOKEN = ""
    response = receiver(body, token="")
    assert response.status_code == 503
    assert not RequestSpan.objects.exists()


@pytest.mark.django_db
def test_only_post(client, settings):
    settings.OTLP_TOKEN = TOKEN
    assert client.get("/v1/traces", HTTP_AUTHORIZATION=f"Bearer {TOKEN}").status_code == 405


@pytest.mark.django_db
def test_live_spans_go_after_the_retention_window(receiver, settings):
    from datetime import timedelta

    from django.utils import timezone

    receiver(protobuf_body(sdk_spans(1)))
    settings.SPAN_RETENTION_HOURS = 1
    assert prune_expired(timezone.now() + timedelta(minutes=30)) == 0
    assert prune_expired(timezone.now() + timedelta(hours=2)) == 4
    assert not RequestSpan.objects.exists()


@pytest.mark.django_db
def test_awkward_text_is_kept_as_sent(receiver):
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    name = 'tab\there, newline\nthere, back\\slash, "quotes", snow \u2603, \\N'
    provider.get_tracer("t").start_span(name, attributes={"prompt": name, "tokens": [1, 2, 3]}).end()
    assert receiver(protobuf_body(exporter.get_finished_spans())).status_code == 200
    row = RequestSpan.objects.get()
    assert row.name == name and row.attributes == {"prompt": name, "tokens": [1, 2, 3]}


def _partial(response):
    answer = ExportTraceServiceResponse()
    if response["Content-Type"] == PB:
        answer.ParseFromString(response.content)
    else:
        from google.protobuf import json_format

        json_format.Parse(response.content, answer)
    return answer.partial_success


def _spoiled(spoil) -> bytes:
    """Three requests' spans (12) as the SDK encodes them, with ``spoil(spans)`` applied."""
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    message = encode_spans(sdk_spans(3))
    spoil(list(message.resource_spans[0].scope_spans[0].spans))
    return message.SerializeToString()


def _set(**values):
    def spoil(spans):
        span = next(s for s in spans if s.name == "decode")
        for key, value in values.items():
            if key == "status":
                span.status.code = value
            elif key == "attribute":
                span.attributes.add(key="prompt", value={"string_value": value})
            else:
                setattr(span, key, value)
    return spoil


@pytest.mark.django_db
@pytest.mark.parametrize(("spoil", "reason"), [
    (_set(kind=9), "kind 9 is not a span kind"),
    (_set(status=70_000), "status code 70000 is not one of"),
    (_set(start_time_unix_nano=2**64 - 1), "not Unix nanoseconds in range"),
    (_set(end_time_unix_nano=0), "not Unix nanoseconds in range"),
    (_set(end_time_unix_nano=1_600_000_000_000_000_000), "ns before it starts"),
    (_set(name="nul\x00name"), "a NUL character"),
    (_set(attribute="text\x00with a nul"), "a NUL character"),
    (_set(span_id=b"\x00" * 8), "all-zero trace or span id"),
    (_set(trace_id=b"\x01\x02"), "malformed trace or span id"),
])
def test_a_span_out_of_range_is_rejected_as_otlp_partial_success_and_the_rest_kept(receiver, spoil, reason):
    response = receiver(_spoiled(spoil))
    assert response.status_code == 200
    partial = _partial(response)
    assert partial.rejected_spans == 1
    assert partial.error_message.startswith("1 spans rejected, 11 kept: span ") and reason in partial.error_message
    assert RequestSpan.objects.count() == 11


@pytest.mark.django_db
def test_json_spans_with_ids_that_are_not_hex_are_rejected_the_rest_kept(receiver):
    body = orjson.loads(_json_body(sdk_spans(2)))
    spans = body["resourceSpans"][0]["scopeSpans"][0]["spans"]
    spans[0]["traceId"], spans[1]["spanId"] = "zz", "0304"
    response = receiver(orjson.dumps(body), content_type=JS)
    assert response.status_code == 200 and response["Content-Type"] == JS
    partial = _partial(response)
    assert partial.rejected_spans == 2
    assert "is not hex" in partial.error_message and "malformed trace or span id" in partial.error_message
    assert RequestSpan.objects.count() == 6


@pytest.mark.django_db
def test_a_batch_of_only_good_spans_answers_no_partial_success(receiver):
    response = receiver(protobuf_body(sdk_spans(1)))
    assert response.status_code == 200 and not _partial(response).rejected_spans
    assert not ExportTraceServiceResponse.FromString(response.content).HasField("partial_success")
