"""The join of request spans to engine steps, on the emulator's inference service: both
join modes, apportioned shares that sum to each step's work, causes against known answers."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

from emulator.serving.engine import ServingConfig
from emulator.serving.spans import emit_run, memory_provider, resource_for
from emulator.serving.trace import serve
from traces.atrace import chrome_trace_bytes, read_trace
from traces.atrace.analysis.requests.joining import (
    RequestJoinError,
    apportion,
    find_steps,
    join,
    requests_from_spans,
)
from traces.atrace.analysis.requests.report import analyse_requests, report
from traces.atrace.io.otlp import SpanRow, spans_of

T0 = 1_700_000_000_000_000_000
PROBLEM_CAUSE = {"long_prefill": "prefill_interference", "throttled": "throttled", "host_stall": "host_stall",
                 "full_queue": "queue"}


def emulated(*problems, seed=1, duration=6.0, resource=None):
    trace, run = serve(duration, ServingConfig(problems=frozenset(problems), seed=seed), t0_ns=T0)
    provider, exporter = memory_provider(resource or resource_for("h", "ENX-1"))
    emit_run(provider.get_tracer("t"), run)
    return trace, run, spans_of(encode_spans(exporter.get_finished_spans()))


def _truth_pairs(run):
    return sorted((s.index, rid, tok) for s in run.steps for rid, tok in zip(s.request_ids, s.tokens, strict=True))


def _pairs(joined, requests):
    return sorted((int(s), requests.ids[int(r)], int(t))
                  for s, r, t in zip(joined.pair_step, joined.pair_req, joined.pair_tokens, strict=True))


@pytest.mark.parametrize("mode", ["ids", "time"])
def test_both_modes_find_every_request_in_every_step_it_was_batched_in(mode):
    trace, run, spans = emulated("long_prefill", duration=3.0)
    requests, steps = requests_from_spans(spans), find_steps(trace)
    joined = join(trace, requests, steps, mode=mode)
    assert joined.mode == mode
    assert joined.confidence == ("high" if mode == "ids" else "medium")
    assert _pairs(joined, requests) == _truth_pairs(run)


def test_time_mode_without_a_named_serving_thread_says_low_confidence():
    from opentelemetry.sdk.resources import Resource

    trace, run, spans = emulated(duration=2.0, resource=Resource.create({"service.name": "anon"}))
    requests = requests_from_spans(spans)
    joined = join(trace, requests, mode="time")
    assert joined.confidence == "low"
    assert _pairs(joined, requests) == _truth_pairs(run)


def test_the_shares_of_each_step_sum_to_its_device_time_and_follow_tokens():
    trace, run, spans = emulated("long_prefill", duration=3.0)
    requests, steps = requests_from_spans(spans), find_steps(trace)
    joined = join(trace, requests, steps)
    assert steps.basis == "device"
    sums = np.bincount(joined.pair_step, weights=joined.pair_share, minlength=len(steps))
    assert np.abs(sums - steps.work).max() < 1000  # ns: within 1 µs (here exact)
    assert (sums == steps.work).all()
    # The step's device time is its kernels' time, as the emulator ran them.
    assert [int(w) for w in steps.work[:50]] == [s.device_ns for s in run.steps[:50]]
    # A 7,000-token prefill takes 7,000 times a decode's share of the same step.
    big = next(s for s in run.steps if max(s.tokens) >= 7000 and 1 in s.tokens)
    mine = joined.pair_step == big.index
    shares = dict(zip(joined.pair_tokens[mine].tolist(), joined.pair_share[mine].tolist(), strict=False))
    assert shares[max(shares)] / shares[1] == pytest.approx(max(shares), rel=1e-3)


@given(st.lists(st.tuples(st.integers(0, 5), st.integers(1, 9000)), min_size=1, max_size=60),
       st.lists(st.integers(0, 10**10), min_size=6, max_size=6))
def test_apportioned_shares_sum_exactly(pairs, work):
    step = np.array([p[0] for p in pairs], np.int64)
    tokens = np.array([p[1] for p in pairs], np.int64)
    work = np.array(work, np.int64)
    share, step_tokens = apportion(work, step, tokens)
    sums = np.bincount(step, weights=share, minlength=6).astype(np.int64)
    used = step_tokens > 0
    assert (sums[used] == work[used]).all()
    assert (share >= 0).all()
    exact = work[step] * tokens / step_tokens[step]
    assert np.abs(share - exact).max() <= 1.0


def test_the_join_survives_the_chrome_round_trip_of_a_stored_capture():
    trace, run, spans = emulated(duration=2.0)
    stored = read_trace(chrome_trace_bytes(trace))
    direct, again = analyse_requests(trace, spans), analyse_requests(stored, spans)
    assert again["join"]["mode"] == "ids" and again["requests"] == direct["requests"]
    assert again["latency_ms"] == direct["latency_ms"]
    assert abs(again["worst"][0]["work_ms"] - direct["worst"][0]["work_ms"]) < 0.01


@pytest.mark.parametrize("problem", sorted(PROBLEM_CAUSE))
@pytest.mark.parametrize("seed", [11, 12])
@pytest.mark.slow  # over 1.5 s on 2 cores: in make test, out of make test-fast
def test_the_slowest_requests_are_blamed_on_the_problem_played(problem, seed):
    trace, run, spans = emulated(problem, seed=seed)
    result = analyse_requests(trace, spans)
    causes = [w["cause"] for w in result["worst"]]
    assert causes.count(PROBLEM_CAUSE[problem]) >= 5, causes
    # Those it blames were in flight while the problem played, or queued behind the backlog
    # it left (up to a second after it ended).
    lo, hi = run.problem_window
    near = {r.id for r in run.requests if r.arrival_ns < hi + 10**9 and r.done_ns > lo}
    blamed = {w["request_id"] for w in result["worst"] if w["cause"] == PROBLEM_CAUSE[problem]}
    assert blamed <= near
    assert blamed & run.truth[problem]


@pytest.mark.parametrize("seed", [11, 12, 13])
def test_without_a_problem_no_request_is_blamed_on_the_device(seed):
    trace, _, spans = emulated(seed=seed)
    result = analyse_requests(trace, spans)
    assert not [r for r in result["rows"] if r["cause"] == "throttled"]
    assert all("throttled" not in w["reason"] for w in result["worst"])


def test_reasons_say_what_happened_in_words():
    trace, _, spans = emulated("throttled", seed=11)
    worst = analyse_requests(trace, spans)["worst"][0]
    assert worst["reason"].startswith("device throttled: temperature 92 °C, clock at 50 %")
    assert worst["health"] == {"max_temperature_c": 92.0, "min_clock_share": 0.5}
    assert worst["operators"][0]["name"] == "mlp_gemm"
    assert sum(worst["split_ms"].values()) == pytest.approx(worst["latency_ms"], abs=0.01)
    trace, _, spans = emulated("long_prefill", seed=11)
    reasons = [w["reason"] for w in analyse_requests(trace, spans)["worst"]]
    assert any("its decode steps shared the device with a 7," in r and "-token prefill" in r for r in reasons)
    trace, _, spans = emulated("full_queue", seed=11)
    reasons = [w["reason"] for w in analyse_requests(trace, spans)["worst"]]
    assert any(r.startswith("queued ") and " ms behind " in r for r in reasons)


def test_a_single_vllm_style_span_gives_its_phases_from_attributes():
    span = SpanRow("a" * 32, "b" * 16, "", "llm_request", T0, T0 + 900_000_000, attributes={
        "gen_ai.request.id": "r1", "gen_ai.latency.time_in_queue": 0.1,
        "gen_ai.latency.time_in_model_prefill": 0.2, "gen_ai.latency.time_in_model_decode": 0.5,
        "gen_ai.usage.prompt_tokens": 10, "gen_ai.usage.completion_tokens": 40})
    requests = requests_from_spans([span])
    assert requests.ids == ["r1"]
    assert [int(requests.phase_ns(p)[0]) for p in ("queue", "prefill", "decode")] == [100_000_000, 200_000_000, 500_000_000]
    assert requests.prompt_tokens[0] == 10 and requests.output_tokens[0] == 40


def test_spans_from_another_run_are_refused_with_the_reason():
    trace, _, spans = emulated(duration=1.0)
    moved = [SpanRow(**{**s.to_dict(), "start_ns": s.start_ns - 10**13, "end_ns": s.end_ns - 10**13}) for s in spans]
    with pytest.raises(RequestJoinError, match="apart"):
        analyse_requests(trace, moved)
    with pytest.raises(RequestJoinError, match="mode must be"):
        analyse_requests(trace, spans, mode="guess")


def test_a_trace_without_engine_steps_is_refused():
    from emulator.workloads.tracing import capture

    training = capture("gpu", 0.01, seed=1)  # steps named step#N, no engine steps
    with pytest.raises(RequestJoinError, match="no engine steps"):
        analyse_requests(training, emulated(duration=0.5)[2])


def test_report_counts_and_percentiles():
    trace, run, spans = emulated(duration=3.0)
    requests, steps = requests_from_spans(spans), find_steps(trace)
    result = report(trace, requests, steps, join(trace, requests, steps))
    lat = sorted((r.done_ns - r.arrival_ns) / 1e6 for r in run.requests)
    assert result["requests"] == len(run.requests) == len(result["rows"])
    assert result["latency_ms"]["p50"] == pytest.approx(float(np.percentile(lat, 50)), abs=0.01)
    assert len(result["worst"]) == 10
    assert result["worst"][0]["latency_ms"] == pytest.approx(lat[-1], abs=0.01)
    assert result["join"]["max_share_error_ns"] == 0.0


def test_every_request_row_names_its_top_kernels_as_its_detail_does():
    trace, _, spans = emulated(duration=2.0)
    result = analyse_requests(trace, spans)
    rows = {r["request_id"]: r for r in result["rows"]}
    assert all(r["operators"] for r in result["rows"] if r["steps"])
    for worst in result["worst"]:
        assert rows[worst["request_id"]]["operators"] == worst["operators"][:3]


def test_numeric_request_ids_in_the_steps_match_the_spans():
    from traces.atrace import Kind, TraceBuilder

    b = TraceBuilder()
    host = b.track("engine", "scheduler")
    b.add("engine_step#0", T0 + 1_000, 5_000, host, kind=Kind.ANNOTATION, args={"request_ids": [7, 8], "tokens": [3, 1]})
    trace = b.build()
    spans = [SpanRow(f"{i:032x}", f"{i:016x}", "", "llm_request", T0, T0 + 10_000, attributes={"gen_ai.request.id": str(i)})
             for i in (7, 8)]
    requests = requests_from_spans(spans)
    joined = join(trace, requests)
    assert joined.mode == "ids" and joined.unknown_ids == 0
    assert sorted(zip([requests.ids[i] for i in joined.pair_req], joined.pair_share.tolist(), strict=True)) == [
        ("7", 3750), ("8", 1250)]


# -- real serving engines: steps that name no request ids, joined by time and phase ----------
SERVING_TRACES = ("sglang_qwen3_prefilldecode.json.gz", "vllm_prefilldecode_piecewise.json.gz")


@pytest.mark.parametrize("shape", ["vllm", "sglang"])
@pytest.mark.parametrize("name", SERVING_TRACES)
def test_a_real_engine_s_step_gets_the_batch_it_names_by_time_and_phase(name, shape):
    from tests.support.engine_spans import engine_spans
    from tests.support.traces import real_trace

    trace = read_trace(real_trace(name))
    steps = find_steps(trace)
    spans, plan = engine_spans(trace, steps, shape)
    requests = requests_from_spans(spans)
    assert requests.phase_sources() == {"attributes" if shape == "vllm" else "spans": len(plan)}
    joined = join(trace, requests, steps)
    assert joined.mode == "time" and joined.confidence == "high"
    assert joined.check == {"steps_checked": 1, "steps_matching": 1, "mismatches": 0, "examples": []}
    # Every request joined, once, to the one step; the batch as large as the step says.
    assert sorted(requests.ids[i] for i in joined.pair_req) == sorted(r["id"] for r in plan)
    assert len(joined.pair_step) == steps.info[0].batch
    # Prefill by prompt tokens, decode one token each; the shares sum to the step's device time.
    tokens = dict(zip([requests.ids[i] for i in joined.pair_req], joined.pair_tokens.tolist(), strict=True))
    assert tokens == {r["id"]: r["prompt"] if r["phase"] == "prefill" else 1 for r in plan}
    assert int(joined.pair_share.sum()) == int(steps.work[0]) > 0
    assert joined.note == "trace clock aligned by its baseTimeNanoseconds"


def test_counts_that_do_not_match_the_batch_found_are_reported_and_lower_the_confidence():
    from tests.support.engine_spans import engine_spans
    from tests.support.traces import real_trace

    trace = read_trace(real_trace("vllm_prefilldecode_piecewise.json.gz"))
    steps = find_steps(trace)
    spans, plan = engine_spans(trace, steps, "vllm")
    missing = next(s.trace_id for s in spans if s.attributes.get("gen_ai.request.id") == "s0-d0")
    joined = join(trace, requests_from_spans([s for s in spans if s.trace_id != missing]), steps)
    assert joined.confidence == "low"
    assert joined.check["mismatches"] == 1
    assert joined.check["examples"][0]["says"] == "batch 46, found 45; decode 37, found 36"
    assert int(joined.pair_share.sum()) == int(steps.work[0])


def _two_steps(first: str, second: str):
    from traces.atrace import Kind, TraceBuilder

    b = TraceBuilder()
    host = b.track("engine", "scheduler")
    ms = 1_000_000
    b.add(first, T0, 10 * ms, host, kind=Kind.ANNOTATION)
    b.add(second, T0 + 10 * ms, 10 * ms, host, kind=Kind.ANNOTATION)
    return b.build()


def _phased(rid, prefill, decode, prompt):
    ms = 1_000_000
    root = SpanRow(f"{rid:032x}", f"{rid:016x}", "", "llm_request", T0 + prefill[0] * ms, T0 + decode[1] * ms,
                   attributes={"gen_ai.request.id": f"r{rid}", "gen_ai.usage.prompt_tokens": prompt},
                   resource={"process.pid": "engine", "thread.name": "scheduler"})
    kids = [SpanRow(root.trace_id, f"{rid * 16 + k:016x}", root.span_id, name, T0 + a * ms, T0 + b * ms)
            for k, (name, (a, b)) in enumerate((("prefill", prefill), ("decode", decode)), 1)]
    return [root, *kids]


def test_a_step_joins_only_the_requests_in_the_phase_it_runs():
    spans = _phased(1, (0, 12), (20, 40), 100) + _phased(2, (-30, -20), (-20, 40), 50)
    requests = requests_from_spans(spans)
    trace = _two_steps("step[EXTEND bs=1 toks=100]", "step[DECODE bs=1]")
    joined = join(trace, requests)
    pairs = sorted((int(s), requests.ids[r], int(t)) for s, r, t in zip(joined.pair_step, joined.pair_req,
                                                                          joined.pair_tokens, strict=True))
    assert pairs == [(0, "r1", 100), (1, "r2", 1)]
    assert joined.check["mismatches"] == 0 and joined.confidence == "high"
    # Steps that say nothing of their phase take every request in flight, each once.
    joined = join(_two_steps("engine_step#0", "engine_step#1"), requests)
    pairs = sorted((int(s), requests.ids[r], int(t)) for s, r, t in zip(joined.pair_step, joined.pair_req,
                                                                          joined.pair_tokens, strict=True))
    assert pairs == [(0, "r1", 100), (0, "r2", 1), (1, "r1", 100), (1, "r2", 1)]
    assert joined.confidence == "medium" and joined.check["steps_checked"] == 0


def test_a_vllm_span_without_prefill_time_ends_prefill_at_its_first_token():
    span = SpanRow("a" * 32, "b" * 16, "", "llm_request", T0, T0 + 900_000_000, attributes={
        "gen_ai.request.id": "r1", "gen_ai.latency.time_in_queue": 0.1, "gen_ai.latency.time_to_first_token": 0.3,
        "gen_ai.latency.e2e": 0.9})
    requests = requests_from_spans([span])
    assert [int(requests.phase_ns(p)[0]) for p in ("queue", "prefill", "decode")] == [100_000_000, 200_000_000,
                                                                                      600_000_000]
    assert requests.phase_sources() == {"attributes": 1}


def test_sglang_s_request_spans_give_its_id_tokens_and_phases():
    from tests.support.engine_spans import _sglang

    provider, exporter = memory_provider(resource_for("h", "ENX-1"))
    _sglang(provider.get_tracer("t"), {"id": "abc123", "prompt": 700, "output": 9, "arrival": T0,
                                       "queue_end": T0 + 5, "prefill_end": T0 + 50, "end": T0 + 90})
    requests = requests_from_spans(spans_of(encode_spans(exporter.get_finished_spans())))
    assert requests.ids == ["abc123"] and int(requests.prompt_tokens[0]) == 700 and int(requests.output_tokens[0]) == 9
    assert [int(requests.phase_ns(p)[0]) for p in ("queue", "prefill", "decode")] == [5, 45, 40]
