"""Spans made by the real OpenTelemetry SDK, encoded as its OTLP exporters encode them."""

from __future__ import annotations

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter


def sdk_spans(n_requests: int = 3, *, t0_ns: int = 1_700_000_000_000_000_000, service: str = "llm-server"):
    """``n_requests`` requests, each a root span with queue/prefill/decode children."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": service, "host.name": "node-1"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("test")
    ms = 1_000_000
    for i in range(n_requests):
        start = t0_ns + i * 100 * ms
        root = tracer.start_span("llm_request", start_time=start, attributes={
            "gen_ai.request.id": f"req-{i}", "gen_ai.usage.prompt_tokens": 100 + i,
            "gen_ai.usage.completion_tokens": 20,
        })
        from opentelemetry import trace

        ctx = trace.set_span_in_context(root)
        for name, a, b in (("queue", 0, 5), ("prefill", 5, 15), ("decode", 15, 60)):
            child = tracer.start_span(name, context=ctx, start_time=start + a * ms)
            child.end(end_time=start + b * ms)
        root.end(end_time=start + 60 * ms)
    provider.shutdown()
    return exporter.get_finished_spans()


def protobuf_body(spans) -> bytes:
    return encode_spans(spans).SerializeToString()
