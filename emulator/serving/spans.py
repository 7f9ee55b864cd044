"""The spans of an emulated inference service, made with the real OpenTelemetry SDK.

Each finished request gives a ``llm_request`` server span (arrival to last token) with three
children: ``queue`` (arrival to admission), ``prefill`` (admission to first token) and
``decode`` (first token to last). Attributes follow the names serving engines use:
``gen_ai.request.id``, ``gen_ai.usage.input_tokens``/``output_tokens`` (and vLLM's
``prompt_tokens``/``completion_tokens``), ``gen_ai.latency.time_in_queue`` and
``time_to_first_token`` (seconds); the resource names the service, host, device and the
serving thread (``process.pid``, ``thread.name`` of the engine's scheduler).

:func:`otlp_provider` exports over OTLP/HTTP (protobuf) to a receiver such as Asicmon's
``/v1/traces``; :func:`memory_provider` keeps them (tests, files).
"""

from __future__ import annotations

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, Status, StatusCode

from emulator.serving.engine import ServedRequest, ServingRun
from emulator.serving.trace import HOST_PID, HOST_TID

__all__ = ["resource_for", "otlp_provider", "memory_provider", "emit_request", "emit_run", "write_otlp_json", "SERVICE"]

SERVICE = "emulated-llm"
MODEL = "emu-llama-1b"


def resource_for(host: str = "", device_serial: str = "", service: str = SERVICE) -> Resource:
    attrs = {"service.name": service, "process.pid": HOST_PID, "thread.name": HOST_TID}
    if host:
        attrs["host.name"] = host
    if device_serial:
        attrs["asicmon.device.serial"] = device_serial
    return Resource.create(attrs)


def otlp_provider(endpoint: str, token: str, resource: Resource) -> TracerProvider:
    """A provider that batches spans to an OTLP/HTTP endpoint with a bearer token."""
    from opentelemetry.exporter.otlp.proto.http import Compression
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    provider = TracerProvider(resource=resource)
    exporter = OTLPSpanExporter(endpoint=endpoint, headers={"Authorization": f"Bearer {token}"},
                                compression=Compression.Gzip, timeout=10)
    provider.add_span_processor(BatchSpanProcessor(exporter, max_export_batch_size=512, schedule_delay_millis=500))
    return provider


def memory_provider(resource: Resource) -> tuple[TracerProvider, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


def emit_request(tracer, req: ServedRequest) -> None:
    """The spans of one finished request."""
    attrs = {
        "gen_ai.request.id": req.id,
        "gen_ai.operation.name": "text_completion",
        "gen_ai.request.model": MODEL,
        "gen_ai.usage.input_tokens": req.prompt_tokens,
        "gen_ai.usage.output_tokens": req.generated,
        "gen_ai.usage.prompt_tokens": req.prompt_tokens,
        "gen_ai.usage.completion_tokens": req.generated,
    }
    if req.rejected:
        root = tracer.start_span("llm_request", kind=SpanKind.SERVER, start_time=req.arrival_ns, attributes=attrs)
        root.set_status(Status(StatusCode.ERROR, "queue full"))
        root.set_attribute("error.type", "queue_full")
        root.end(end_time=req.arrival_ns + 1)
        return
    attrs["gen_ai.latency.time_in_queue"] = (req.admitted_ns - req.arrival_ns) / 1e9
    attrs["gen_ai.latency.time_to_first_token"] = (req.first_token_ns - req.arrival_ns) / 1e9
    root = tracer.start_span("llm_request", kind=SpanKind.SERVER, start_time=req.arrival_ns, attributes=attrs)
    ctx = trace.set_span_in_context(root)
    for name, start, end in (("queue", req.arrival_ns, req.admitted_ns),
                             ("prefill", req.admitted_ns, req.first_token_ns),
                             ("decode", req.first_token_ns, req.done_ns)):
        child = tracer.start_span(name, context=ctx, start_time=start, attributes={"gen_ai.request.id": req.id})
        child.end(end_time=max(end, start))
    root.end(end_time=req.done_ns)


def emit_run(tracer, run: ServingRun) -> int:
    """The spans of every finished request of a run; returns how many requests."""
    done = [r for r in run.requests if r.finished]
    for req in done:
        emit_request(tracer, req)
    return len(done)


def write_otlp_json(spans, path, batch: int = 512) -> int:
    """Write SDK spans as the Collector's file exporter does: one OTLP JSON
    ExportTraceServiceRequest a line (gzipped when the name ends in .gz)."""
    import gzip
    from pathlib import Path

    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    from traces.atrace.io.otlp import request_to_json

    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    spans = list(spans)
    with opener(path, "wb") as fh:
        for i in range(0, len(spans), batch):
            fh.write(request_to_json(encode_spans(spans[i : i + batch])) + b"\n")
    return len(spans)
