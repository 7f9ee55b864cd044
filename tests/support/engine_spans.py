"""Spans of a real serving engine's requests for the steps of its profiler trace: made with the
real OpenTelemetry SDK, on the trace's Unix clock (``baseTimeNanoseconds``), one request for
every request each step's name counts (its prefill requests prefilling in it, its decode
requests decoding through it), in vLLM's shape (one ``llm_request`` span with
``gen_ai.latency.*``) or SGLang's (a bootstrap-room root, a ``Req`` span with ``rid``, the
scheduler thread's span and its ``prefill_waiting`` / ``prefill_forward`` / ``decode_loop``
slices)."""

from __future__ import annotations

from opentelemetry import trace as otel
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from traces.atrace.io.otlp import spans_of

MS = 1_000_000
SHAPES = ("vllm", "sglang")


def _split(total: int, n: int) -> list[int]:
    """``total`` tokens over ``n`` prompts, as even as whole numbers go."""
    if n <= 0:
        return []
    base, extra = divmod(max(total, n), n)
    return [base + (1 if i < extra else 0) for i in range(n)]


def planned_requests(trace, steps) -> list[dict]:
    """Per step, the requests its name counts, with their times (epoch ns) and tokens."""
    base = int(trace.meta.get("baseTimeNanoseconds") or 0)
    out = []
    for k, info in enumerate(steps.info):
        start, end = int(steps.start[k]) + base, int(steps.end[k]) + base
        prefill = max(info.prefill, 0) if info.prefill >= 0 else max(info.batch, 0)
        decode = max(info.decode, 0)
        prompts = _split(info.prefill_tokens if info.prefill_tokens > 0 else 512 * prefill, prefill)
        for i, tokens in enumerate(prompts):
            out.append({"id": f"s{k}-p{i}", "step": k, "phase": "prefill", "prompt": tokens, "output": 16,
                        "arrival": start - 20 * MS, "queue_end": start - MS // 2, "prefill_end": end + MS // 2,
                        "end": end + 30 * MS})
        for i in range(decode):
            out.append({"id": f"s{k}-d{i}", "step": k, "phase": "decode", "prompt": 200 + i, "output": 64,
                        "arrival": start - 80 * MS, "queue_end": start - 70 * MS, "prefill_end": start - 60 * MS,
                        "end": end + 40 * MS})
    return out


def engine_spans(trace, steps, shape: str = "vllm"):
    """The SpanRows (through OTLP's protobuf, as an exporter sends them) of the requests of
    every step of ``trace``, and the plan they follow."""
    finished, plan = engine_sdk_spans(trace, steps, shape)
    return spans_of(encode_spans(finished)), plan


def engine_sdk_spans(trace, steps, shape: str = "vllm"):
    """The SDK's finished spans of the requests of every step of ``trace`` (for an exporter
    or a file), and the plan they follow."""
    if shape not in SHAPES:
        raise ValueError(f"shape must be one of {SHAPES}")
    track = trace.tracks[int(steps.track[0])] if len(steps) else None
    resource = {"service.name": shape}
    if track is not None:
        resource.update({"process.pid": str(track.pid), "thread.name": str(track.tid)})
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create(resource))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer(shape)
    plan = planned_requests(trace, steps)
    for r in plan:
        (_vllm if shape == "vllm" else _sglang)(tracer, r)
    provider.shutdown()
    return exporter.get_finished_spans(), plan


def _vllm(tracer, r: dict) -> None:
    s = 1e9
    span = tracer.start_span("llm_request", kind=otel.SpanKind.SERVER, start_time=r["arrival"], attributes={
        "gen_ai.request.id": r["id"], "gen_ai.response.model": "Qwen3-8B",
        "gen_ai.usage.prompt_tokens": r["prompt"], "gen_ai.usage.completion_tokens": r["output"],
        "gen_ai.latency.time_in_queue": (r["queue_end"] - r["arrival"]) / s,
        "gen_ai.latency.time_to_first_token": (r["prefill_end"] - r["arrival"]) / s,
        "gen_ai.latency.e2e": (r["end"] - r["arrival"]) / s,
        "gen_ai.latency.time_in_model_prefill": (r["prefill_end"] - r["queue_end"]) / s,
        "gen_ai.latency.time_in_model_decode": (r["end"] - r["prefill_end"]) / s,
        "gen_ai.latency.time_in_model_inference": (r["end"] - r["queue_end"]) / s,
    })
    span.end(end_time=r["end"])


def _sglang(tracer, r: dict) -> None:
    room = tracer.start_span("Bootstrap Room 0x0", start_time=r["arrival"], attributes={"bootstrap_room": "0x0"})
    req = tracer.start_span(f"Req {r['id'][:8]}", start_time=r["arrival"], context=otel.set_span_in_context(room),
                            attributes={"rid": r["id"], "prompt_tokens": r["prompt"],
                                        "completion_tokens": r["output"]})
    thread = tracer.start_span("Scheduler [TP 0] (host:0 | pid:1)", start_time=r["arrival"],
                               context=otel.set_span_in_context(req))
    ctx = otel.set_span_in_context(thread)
    for name, a, b in (("prefill_waiting", r["arrival"], r["queue_end"]),
                       ("prefill_forward", r["queue_end"], r["prefill_end"]),
                       ("decode_loop", r["prefill_end"], r["end"])):
        tracer.start_span(name, start_time=a, context=ctx).end(end_time=b)
    for span in (thread, req, room):
        span.end(end_time=r["end"])
