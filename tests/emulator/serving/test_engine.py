"""The emulator's inference service: arrivals, continuous batching, queueing and its problems
(its device trace, spans and live capture have their tests beside these)."""

import pytest

from emulator.serving.engine import LONG_PROMPT, STALL_NS, ServingConfig, ServingEngine
from emulator.serving.trace import serve

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


def test_queueing_when_the_batch_is_full():
    engine = ServingEngine(ServingConfig(rate_per_s=400, max_batch=2, seed=2), T0, 0.5)
    run = engine.run()
    waited = [r.admitted_ns - r.arrival_ns for r in run.requests]
    assert max(waited) > 100 * 1_000_000
    assert max(len(s.request_ids) for s in run.steps) == 2


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
