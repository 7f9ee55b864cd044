"""The spans of the emulated inference service, made with the real OpenTelemetry SDK: a server
span per request with its queue, prefill and decode, a refused request as an error, and the
Collector's file format written out."""

import gzip

import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.trace import StatusCode

from emulator.serving.engine import ServedRequest, ServingConfig
from emulator.serving.spans import (
    SERVICE,
    emit_request,
    emit_run,
    memory_provider,
    resource_for,
    write_otlp_json,
)
from emulator.serving.trace import serve
from traces.atrace.io.otlp import read_otlp_json, spans_of

T0 = 1_700_000_000_000_000_000


def _run(*problems, seed=3, duration=3.0):
    return serve(duration, ServingConfig(problems=frozenset(problems), seed=seed), t0_ns=T0)


def test_the_sdk_spans_carry_phases_and_gen_ai_attributes():
    _, run = _run(duration=1.0)
    provider, exporter = memory_provider(resource_for("host-1", "ENX-0001"))
    emitted = emit_run(provider.get_tracer("t"), run)
    spans = spans_of(encode_spans(exporter.get_finished_spans()))
    assert emitted == len(run.requests) and len(spans) == 4 * emitted
    root = next(s for s in spans if s.name == "llm_request")
    req = next(r for r in run.requests if r.id == root.request_id)
    assert root.attributes["gen_ai.usage.input_tokens"] == req.prompt_tokens
    assert root.attributes["gen_ai.latency.time_in_queue"] == pytest.approx(
        (req.admitted_ns - req.arrival_ns) / 1e9
    )
    assert root.resource["asicmon.device.serial"] == "ENX-0001"
    children = {s.name: s for s in spans if s.parent_span_id == root.span_id}
    assert set(children) == {"queue", "prefill", "decode"}
    assert children["decode"].end_ns == req.done_ns == root.end_ns


def test_a_refused_request_is_one_error_span_that_says_the_queue_was_full():
    provider, exporter = memory_provider(resource_for())
    refused = ServedRequest("req-9", T0, 64, 16, rejected=True, done_ns=T0)
    emit_request(provider.get_tracer("t"), refused)
    (span,) = exporter.get_finished_spans()
    assert span.name == "llm_request" and span.status.status_code == StatusCode.ERROR
    assert (
        span.attributes["error.type"] == "queue_full"
        and span.attributes["gen_ai.request.id"] == "req-9"
    )
    assert "gen_ai.latency.time_in_queue" not in span.attributes
    assert span.resource.attributes["service.name"] == SERVICE
    assert (
        "host.name" not in span.resource.attributes
        and "asicmon.device.serial" not in span.resource.attributes
    )


def test_only_finished_requests_are_emitted():
    _, run = _run(duration=1.0)
    unfinished = ServedRequest("req-late", T0, 64, 16, admitted_ns=T0 + 5)
    run.requests.append(unfinished)
    provider, exporter = memory_provider(resource_for("host-1"))
    emitted = emit_run(provider.get_tracer("t"), run)
    assert emitted == len(run.requests) - 1
    assert "req-late" not in {
        s.attributes["gen_ai.request.id"] for s in exporter.get_finished_spans()
    }


@pytest.mark.parametrize("name", ["spans.jsonl", "spans.jsonl.gz"])
def test_spans_written_as_the_collectors_file_exporter_read_back_whole(tmp_path, name):
    _, run = _run(duration=1.0)
    provider, exporter = memory_provider(resource_for("host-1", "ENX-0001"))
    emit_run(provider.get_tracer("t"), run)
    spans = exporter.get_finished_spans()
    path = tmp_path / name
    assert write_otlp_json(spans, path, batch=10) == len(spans)
    raw = gzip.decompress(path.read_bytes()) if name.endswith(".gz") else path.read_bytes()
    assert raw.count(b"\n") == -(-len(spans) // 10)  # one request a line, ten spans each
    again = read_otlp_json(path)
    assert sorted(s.span_id for s in again) == sorted(
        s.span_id for s in spans_of(encode_spans(spans))
    )
    assert {s.resource["host.name"] for s in again} == {"host-1"}
