"""Rules about the device: exposed communication (3), host-device copies (5) and kernel
hotspots (6), each on its known-answer trace and silent on the clean loop."""

from __future__ import annotations

import pytest

from tests.traces.atrace.analysis import known_answers as ka
from traces.atrace.analysis.advice import DEFAULT_ADVICE_LIMITS
from traces.atrace.analysis.advice.context import build_context
from traces.atrace.analysis.advice.device import communication_rule, copies_rule, hotspot_rule
from traces.atrace.analysis.advice.run import path_shares


def _rule(name: str, ctx):
    if name == "kernel_hotspot":
        return hotspot_rule(ctx, path_shares(ctx).get("device", 0.0))
    return {"exposed_communication": communication_rule, "copies": copies_rule}[name](ctx)


@pytest.fixture(scope="module")
def clean_ctx():
    return build_context(ka.single(None).trace, DEFAULT_ADVICE_LIMITS)


@pytest.mark.parametrize("problem", ["exposed_communication", "copies", "kernel_hotspot"])
def test_each_device_rule_finds_its_problem_with_the_injected_saving(problem, clean_ctx):
    case = ka.single(problem)
    finding = _rule(problem, build_context(case.trace, DEFAULT_ADVICE_LIMITS))
    assert finding is not None and finding.rule == problem
    injected = case.injected_ns * ka.STEPS
    assert abs(finding.saving_ns - injected) <= 0.10 * injected
    assert _rule(problem, clean_ctx) is None


def test_the_hotspot_names_the_kernel_that_holds_most_of_the_device_time():
    ctx = build_context(ka.single("kernel_hotspot").trace, DEFAULT_ADVICE_LIMITS)
    finding = _rule("kernel_hotspot", ctx)
    (kernel,) = finding.measured["kernels"]
    assert "hot" in kernel["op"] and kernel["share_of_device_time"] > 0.5
    # Below the device share it needs, the rule stays silent.
    assert hotspot_rule(ctx, 0.1) is None
