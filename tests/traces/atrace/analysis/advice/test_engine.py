"""The advisor on an inference engine's decode loop (known_answers.decode_loop): graph
replays with gaps the host causes, a prefill batched with decodes, KV-cache writes — each a
finding whose saving is within 10 % of the injected time, none on the clean loop; and the
issue's ROCm decode step, where the host waits in one blocking copy under ``aten::copy_``
while the device idles, gets the blocking-copy finding as its reason."""

from __future__ import annotations

import pytest

from tests.traces.atrace.analysis import known_answers as ka
from traces.atrace import advise

CASES = {
    "replay_gaps": dict(gap_us=1000),
    "kv_cache": dict(kv_us=300),
    "prefill_stall": dict(prefill_us=2000),
}


def _within(f, case) -> None:
    injected = case.injected_ns * ka.STEPS
    assert abs(f.saving_ns - injected) <= 0.10 * injected, (f.rule, f.saving_ns, injected)


@pytest.mark.parametrize("call", ["cudaGraphLaunch", "hipGraphLaunch"])
def test_gaps_between_graph_replays_are_found_with_the_injected_saving(call):
    case = ka.decode_loop(gap_us=1000, call=call)
    found = advise(case.trace)
    assert found.rules == ["replay_gaps"], found.rules  # not rule 8 too: one bound of one fix
    f = found.rule("replay_gaps")
    _within(f, case)
    m = f.measured
    assert m["replays"] == ka.STEPS and m["gaps"] == ka.STEPS - 1
    assert m["median_gap_us"] == pytest.approx(1000, rel=0.05)
    assert m["host_between_launches_median_us"] == pytest.approx(ka.DECODE_REPLAY_US + 1000, rel=0.05)
    # The device idles about 1 ms of each 2.5 ms step.
    assert m["idle_share_of_step"] == pytest.approx(3 * 1000 / (4 * 2513), rel=0.1)
    assert "sampler.schedule" in f.title and "idle" in f.title
    assert f.evidence.events and f.evidence.windows_ns and f.evidence.operators[0]["op"] == "sampler.schedule"
    assert found.verdict == "host-bound" and found.reason and f.title in found.summary


@pytest.mark.parametrize("rule", ["kv_cache", "prefill_stall"])
def test_kv_cache_and_prefill_are_found_with_the_injected_saving(rule):
    case = ka.decode_loop(**CASES[rule])
    found = advise(case.trace)
    f = found.rule(rule)
    assert f is not None, found.rules
    _within(f, case)
    assert "replay_gaps" not in found.rules and "graph_replays" not in found.rules


def test_kv_cache_share_and_prefill_steps_are_measured():
    kv = advise(ka.decode_loop(kv_us=300).trace).rule("kv_cache")
    assert kv.measured["share_of_device_time"] == pytest.approx(300 / 1800, rel=0.05)
    assert "reshape_and_cache_kernel" in kv.title
    pre = advise(ka.decode_loop(prefill_us=2000).trace).rule("prefill_stall")
    assert pre.measured["steps_with_prefill_and_decode"] == ka.STEPS // 2
    assert pre.evidence.operators[0]["op"] == "prefill_attention_kernel"


@pytest.mark.parametrize("call", ["cudaGraphLaunch", "hipGraphLaunch"])
def test_a_clean_decode_loop_has_no_finding(call):
    found = advise(ka.decode_loop(call=call).trace)
    assert found.findings == [], found.rules
    assert found.verdict == "device-bound"
    assert found.account["inference"]["graph_replays"]["replays"] == ka.STEPS


def test_the_rocm_decode_step_that_waits_in_one_blocking_copy():
    """Host-bound (the host 98 %, the device 2 %), and the reason is the wait: the blocking
    hipMemcpyWithStream under aten::copy_, with its saving, ahead of any copy finding."""
    case = ka.decode_loop(blocking_copy_us=60_000, call="hipGraphLaunch")
    found = advise(case.trace)
    assert found.verdict == "host-bound"
    top = found.findings[0]
    assert top.rule == "host_sync", found.rules
    _within(top, case)
    kinds = top.measured["by_kind"]
    assert kinds[0]["kind"] == "blocking copy" and kinds[0]["calls"] == ["hipMemcpyWithStream"]
    assert kinds[0]["operator"] == "aten::copy_"
    assert found.reason == top.title and top.title in found.summary
    assert "copies" not in found.rules  # the 2 µs copy is not what costs the step


def test_without_steps_a_prefill_stalls_only_the_decodes_it_overlaps():
    batched = ka.decode_loop(prefill_us=2000, steps=False)
    f = advise(batched.trace).rule("prefill_stall")
    assert f is not None
    _within(f, batched)
    alone = advise(ka.decode_loop(prefill_us=2000, steps=False, prefill_alone=True).trace)
    assert alone.rule("prefill_stall") is None, alone.rules


def test_phases_are_words_not_parts_of_longer_names():
    from traces.atrace.analysis.advice.engine import _DECODE, _PREFILL

    assert all(_DECODE.search(n) for n in ("decode", "decode_step", "model.decode", "flash_decode_kernel"))
    assert not any(_DECODE.search(n) for n in ("TransformerDecoderLayer", "decoder.forward", "nn.Decoder"))
    assert all(_PREFILL.search(n) for n in ("prefill", "chunked_prefill", "prefill_attention_kernel"))
