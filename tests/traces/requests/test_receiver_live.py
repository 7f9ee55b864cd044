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


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
def test_the_exporter_reads_a_partial_success_and_the_good_spans_are_kept():
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("odd")
    tracer.start_span("nul\x00in its name", start_time=1_700_000_000_000_000_000).end(end_time=1_700_000_000_000_001_000)
    tracer.start_span("ends first", start_time=1_700_000_000_000_002_000).end(end_time=1_700_000_000_000_001_000)
    batch = [*sdk_spans(1, service="partial-service"), *memory.get_finished_spans()]
    web, base = start_web(child_env(OTLP_TOKEN=TOKEN))
    try:
        exporter = ProtobufExporter(endpoint=f"{base}/v1/traces", headers={"Authorization": f"Bearer {TOKEN}"},
                                    compression=Compression.Gzip)
        transport = exporter._client._transport  # the exporter's own HTTP transport: its answers kept to read
        answers = []
        send = transport.request
        transport.request = lambda *a, **kw: answers.append(send(*a, **kw)) or answers[-1]
        assert exporter.export(batch) == SpanExportResult.SUCCESS  # 200: not retried, not dropped
        exporter.shutdown()
    finally:
        web.stop()
    assert len(answers) == 1 and answers[0].status_code == 200
    partial = ExportTraceServiceResponse.FromString(answers[0].content()).partial_success
    assert partial.rejected_spans == 2
    assert "2 spans rejected, 4 kept" in partial.error_message
    assert "a NUL character" in partial.error_message and "ns before it starts" in partial.error_message
    assert RequestSpan.objects.filter(service="partial-service").count() == 4
