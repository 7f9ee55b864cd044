"""What an inference engine's trace shows, recognised from its events: graph replays and how
they follow each other, KV-cache writes, the prefill and decode phases."""

from __future__ import annotations

import pytest

from tests.traces.atrace.analysis import known_answers as ka
from tests.traces.atrace.analysis.advice.test_waits import STEPS, _decode_loop
from tests.traces.atrace.analysis.known_answers import US, _Loop
from traces.atrace import advise
from traces.atrace.analysis.advice import DEFAULT_ADVICE_LIMITS
from traces.atrace.analysis.advice.context import build_context
from traces.atrace.analysis.advice.inference import inference_facts
from traces.atrace.model.trace import Kind


def test_a_graph_decode_loop_says_how_its_replays_follow_each_other():
    """Recognised from the graph launches: four replays of 200 µs, each after the host's 2 ms
    wait, so none back to back, with the gaps and the host's time between launches."""
    found = advise(_decode_loop("blocking copy"))
    r = found.account["inference"]["graph_replays"]
    assert r["replays"] == STEPS and r["replay_median_us"] == pytest.approx(200)
    assert r["back_to_back_share"] == 0 and r["median_gap_us"] == pytest.approx(2061, abs=1)
    assert r["host_between_launches_median_us"] == pytest.approx(2261, abs=1)
    assert any(line.startswith("Graph replays: 4") for line in found.account["lines"])


def test_kv_cache_writes_and_phases_are_recognised_from_the_events():
    loop = _Loop()
    t = 0
    for k in range(STEPS):
        start = t
        name = "prefill" if k == 0 else "decode"
        t = loop.op(
            t,
            "_C_cache_ops::reshape_and_cache_flash",
            20 * US,
            "reshape_and_cache_flash_kernel",
            30 * US,
        )
        t = loop.op(t, "aten::mm", 20 * US, "gemm_kernel", 100 * US)
        loop.b.add(
            f"engine.{name}",
            start,
            t - start,
            loop.host,
            kind=Kind.ANNOTATION,
            cat="user_annotation",
        )
        t = loop.sync(t)
        loop.step(k, start, t)
        t += US
    facts = advise(loop.build()).account["inference"]
    assert facts["kv_cache"]["count"] == STEPS and facts["kv_cache"]["time_us"] == pytest.approx(
        STEPS * 30
    )
    assert (
        facts["phases"]["prefill"]["count"] == 1 and facts["phases"]["decode"]["count"] == STEPS - 1
    )
    assert "graph_replays" not in facts


def test_a_training_loop_shows_no_inference_facts():
    ctx = build_context(ka.single(None).trace, DEFAULT_ADVICE_LIMITS)
    assert inference_facts(ctx) == {}
