"""Where the time goes: disjoint parts that add up to the analysed windows' time, the top
host operators and kernels, and a sentence that says it."""

from __future__ import annotations

import pytest

from tests.traces.atrace.analysis import known_answers as ka
from traces.atrace.analysis.advice import DEFAULT_ADVICE_LIMITS
from traces.atrace.analysis.advice.account import account
from traces.atrace.analysis.advice.context import build_context


def _account(problem):
    return account(build_context(ka.single(problem).trace, DEFAULT_ADVICE_LIMITS))


@pytest.mark.parametrize("problem", [None, "launch_bound", "input_stall", "kernel_hotspot"])
def test_the_parts_add_up_to_the_windows_time(problem):
    acc = _account(problem)
    assert acc["device"] is True
    assert sum(p["time_us"] for p in acc["parts"]) == pytest.approx(acc["time_us"], abs=0.01)
    assert sum(p["share"] for p in acc["parts"]) == pytest.approx(1.0, abs=0.001)
    assert len({p["part"] for p in acc["parts"]}) == len(acc["parts"])


def test_the_injected_problem_is_the_part_that_grows():
    stall = {p["part"]: p["time_us"] for p in _account("input_stall")["parts"]}
    clean = {p["part"]: p["time_us"] for p in _account(None)["parts"]}
    assert stall["input"] >= ka.STEPS * 600 * 0.9 > clean.get("input", 0)
    runtime = {p["part"]: p["share"] for p in _account("launch_bound")["parts"]}
    assert max(runtime, key=runtime.get) in ("runtime", "operators")


def test_the_top_kernel_and_operator_are_named_in_the_lines():
    acc = _account("kernel_hotspot")
    assert acc["kernels"][0]["kernel"] == "sm90_hot_attention_kernel"
    assert acc["kernels"][0]["count"] == ka.STEPS
    assert acc["host_operators"][0]["op"] == "aten::linear"
    assert acc["lines"][0].startswith(f"Where the time goes, over {ka.STEPS} steps")
    assert "sm90_hot_attention_kernel" in acc["lines"][-1]
