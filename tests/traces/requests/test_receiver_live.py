"""The SDK's own OTLP/HTTP exporters, protobuf and JSON, against a real Daphne."""

import pytest
from opentelemetry.exporter.otlp.json.http.trace_exporter import OTLPSpanExporter as JsonExporter
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
    OTLPSpanExporter as ProtobufExporter,
)
from opentelemetry.sdk.trace.export import SpanExportResult

from tests.support.otlp import sdk_spans
from tests.support.processes import child_env, start_web
from traces.requests.models import RequestSpan

TOKEN = "live-otlp-token"


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
def test_the_sdk_exporters_deliver_spans_to_a_real_web_process():
    web, base = start_web(child_env(OTLP_TOKEN=TOKEN))
    try:
        auth = {"Authorization": f"Bearer {TOKEN}"}
        protobuf = ProtobufExporter(endpoint=f"{base}/v1/traces", headers=auth, compression=Compression.Gzip)
        assert protobuf.export(sdk_spans(2, service="pb-service")) == SpanExportResult.SUCCESS
        json_exporter = JsonExporter(endpoint=f"{base}/v1/traces", headers=auth)
        assert json_exporter.export(sdk_spans(3, service="json-service")) == SpanExportResult.SUCCESS
        wrong = ProtobufExporter(endpoint=f"{base}/v1/traces", headers={"Authorization": "Bearer nope"})
        assert wrong.export(sdk_spans(1, service="intruder")) == SpanExportResult.FAILURE
        for exporter in (protobuf, json_exporter, wrong):
            exporter.shutdown()
    finally:
        web.stop()
    counts = {s: RequestSpan.objects.filter(service=s).count() for s in ("pb-service", "json-service", "intruder")}
    assert counts == {"pb-service": 8, "json-service": 12, "intruder": 0}
    ids = set(RequestSpan.objects.filter(service="json-service", name="llm_request").values_list("request_id", flat=True))
    assert ids == {"req-0", "req-1", "req-2"}
