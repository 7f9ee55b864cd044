"""The emulator's inference service: arrivals, continuous batching, queueing, the device
trace's steps naming their batch, spans from the real OpenTelemetry SDK, and its problems."""

import numpy as np
import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

from emulator.serving.engine import LONG_PROMPT, STALL_NS, ServingConfig, ServingEngine
from emulator.serving.spans import emit_run, memory_provider, resource_for
from emulator.serving.trace import STEP_PREFIX, serve
from traces.atrace.io.otlp import spans_of
from traces.atrace.model.trace import Kind

T0 = 1_700_000_000_000_000_000


def _run(*problems, seed=3, duration=3.0):
    return serve(duration, ServingConfig(problems=frozenset(problems), seed=seed), t0_ns=T0)


def test_a_run_is_reproducible_from_its_seed():
    a, run_a = _run(seed=5)
    b, run_b = _run(seed=5)
    assert len(a) == len(b) and (a.ts == b.ts).all()
    assert [r.id for r in run_a.requests] == [r.id for r in run_b.requests]
    assert len(_run(seed=6)[0]) != len(a)


def test_batches_change_every_step_and_every_request_is_served_in_order_of_its_phases():
    _, run = _run()
    members = [frozenset(s.request_ids) for s in run.steps]
    # Continuous batching: requests join running batches (a step with prefills and decodes)
    # and leave them while others go on.
    assert sum("prefill" in s.phases and "decode" in s.phases for s in run.steps) > 20
    left_early = sum(bool(a - b) and bool(a & b) for a, b in zip(members, members[1:], strict=False))
    assert left_early > 20
    assert max(len(m) for m in members) <= ServingConfig().max_batch
    for r in run.requests:
        assert r.finished
        assert r.arrival_ns <= r.admitted_ns < r.first_token_ns <= r.done_ns
        assert r.generated == r.output_tokens == len(r.steps)
    # Prefill steps carry the prompt's tokens, decode steps one token.
    for s in run.steps:
        for tok, phase in zip(s.tokens, s.phases, strict=True):
            assert (tok == 1) == (phase == "decode")


def test_arrivals_are_poisson_with_mixed_lengths():
    _, run = serve(20.0, ServingConfig(seed=1), t0_ns=T0)
    gaps = [b.arrival_ns - a.arrival_ns for a, b in zip(run.requests, run.requests[1:], strict=False)]
    mean_s = sum(gaps) / len(gaps) / 1e9
    assert 1 / mean_s == pytest.approx(ServingConfig().rate_per_s, rel=0.2)
    # Exponential gaps: their standard deviation is about their mean.
    sd = (sum((g / 1e9 - mean_s) ** 2 for g in gaps) / len(gaps)) ** 0.5
    assert sd == pytest.approx(mean_s, rel=0.25)
    assert len({r.prompt_tokens // 200 for r in run.requests}) >= 4
    assert len({r.output_tokens // 30 for r in run.requests}) >= 3


def test_the_trace_steps_name_their_batch_and_their_kernels_follow():
    trace, run = _run()
    steps = [i for i in range(len(trace)) if trace.strings[int(trace.name[i])].startswith(STEP_PREFIX)]
    assert len(steps) == len(run.steps)
    first = trace.args.get(steps[0])
    assert first["request_ids"] == run.steps[0].request_ids and first["tokens"] == run.steps[0].tokens
    kernels = trace.kind == Kind.KERNEL
    assert kernels.sum() == 13 * len(run.steps)
    assert (trace.kind == Kind.COUNTER).sum() > 10


def test_queueing_when_the_batch_is_full():
    engine = ServingEngine(ServingConfig(rate_per_s=400, max_batch=2, seed=2), T0, 0.5)
    run = engine.run()
    waited = [r.admitted_ns - r.arrival_ns for r in run.requests]
    assert max(waited) > 100 * 1_000_000
    assert max(len(s.request_ids) for s in run.steps) == 2


def test_the_sdk_spans_carry_phases_and_gen_ai_attributes():
    _, run = _run(duration=1.0)
    provider, exporter = memory_provider(resource_for("host-1", "ENX-0001"))
    emitted = emit_run(provider.get_tracer("t"), run)
    spans = spans_of(encode_spans(exporter.get_finished_spans()))
    assert emitted == len(run.requests) and len(spans) == 4 * emitted
    root = next(s for s in spans if s.name == "llm_request")
    req = next(r for r in run.requests if r.id == root.request_id)
    assert root.attributes["gen_ai.usage.input_tokens"] == req.prompt_tokens
    assert root.attributes["gen_ai.latency.time_in_queue"] == pytest.approx((req.admitted_ns - req.arrival_ns) / 1e9)
    assert root.resource["asicmon.device.serial"] == "ENX-0001"
    children = {s.name: s for s in spans if s.parent_span_id == root.span_id}
    assert set(children) == {"queue", "prefill", "decode"}
    assert children["decode"].end_ns == req.done_ns == root.end_ns


@pytest.mark.parametrize("problem", ["long_prefill", "throttled", "host_stall", "full_queue"])
def test_each_problem_leaves_its_mark(problem):
    trace, run = _run(problem, duration=6.0)
    lo, hi = run.problem_window
    assert run.truth[problem]
    if problem == "long_prefill":
        assert any(max(s.tokens) == LONG_PROMPT and "decode" in s.phases for s in run.steps)
    if problem == "throttled":
        assert {s.clock_share for s in run.steps if lo <= s.start_ns < hi} == {0.5}
        assert all(s.temperature_c >= 90 for s in run.steps if lo <= s.start_ns < hi)
    if problem == "host_stall":
        assert run.stalls and all(b - a == STALL_NS for a, b in run.stalls)
        assert trace.find_name("scheduler stall") >= 0
    if problem == "full_queue":
        assert max(r.admitted_ns - r.arrival_ns for r in run.requests) > 300 * 1_000_000


def test_unknown_problems_are_refused():
    with pytest.raises(ValueError, match="unknown serving problems"):
        ServingConfig(problems=frozenset({"gremlins"}))


class _FakeTime:
    """A wall clock that moves only when slept on (a live capture without the wait)."""

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self.now = start

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_a_live_capture_serves_in_wall_clock_time_at_the_device_s_clock():
    from emulator.serving.live import capture_serving_live
    from emulator.workloads.tracing import DeviceNow

    done, ended = [], []
    t = _FakeTime()
    cool = capture_serving_live(2.0, lambda s: DeviceNow(), config=ServingConfig(seed=1), on_done=done.append,
                                on_end=ended.append, clock=t.clock, sleep=t.sleep)
    assert ended and done and all(r.finished for r in done)
    assert cool.trace.meta["workload"] == "llm_serving" and cool.iterations_kept == cool.iterations_run > 0
    t = _FakeTime()
    hot_runs = []
    hot = capture_serving_live(2.0, lambda s: DeviceNow(faults=frozenset({"overheat"})), config=ServingConfig(seed=1),
                               on_end=hot_runs.append, clock=t.clock, sleep=t.sleep)

    def clocks(trace):
        return {trace.args.get(int(i))["clock_share"] for i in np.flatnonzero(trace.kind == Kind.COUNTER)}

    assert clocks(cool.trace) == {1.0} and clocks(hot.trace) == {0.5}
    # The same arrivals; at half the clock the same work takes twice the device time.
    step_hot, step_cool = hot_runs[0].steps[0], ended[0].steps[0]
    assert step_hot.tokens == step_cool.tokens
    assert step_hot.device_ns == pytest.approx(2 * step_cool.device_ns, rel=0.1)


def test_a_device_that_hangs_ends_the_live_capture_and_hands_over_what_it_finished():
    from emulator.serving.live import capture_serving_live
    from emulator.workloads.tracing import DeviceHung, DeviceNow

    t = _FakeTime()
    hang_at = t.now + 1.0
    ended = []
    with pytest.raises(DeviceHung):
        capture_serving_live(2.0, lambda s: DeviceNow(faults=frozenset({"hang"}) if s >= hang_at else frozenset()),
                             config=ServingConfig(seed=1), on_end=ended.append, clock=t.clock, sleep=t.sleep)
    assert len(ended) == 1 and any(r.finished for r in ended[0].requests)
