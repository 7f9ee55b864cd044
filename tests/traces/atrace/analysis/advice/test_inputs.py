"""Rule 4, input stalls: the device idle at a step's start while the host loads input."""

from __future__ import annotations

from dataclasses import replace

from tests.traces.atrace.analysis import known_answers as ka
from tests.traces.atrace.analysis.known_answers import US
from traces.atrace.analysis.advice import DEFAULT_ADVICE_LIMITS
from traces.atrace.analysis.advice.context import build_context
from traces.atrace.analysis.advice.inputs import input_rule, stall_intervals


def test_the_stall_is_the_data_loader_time_before_the_first_device_work():
    case = ka.single("input_stall")
    ctx = build_context(case.trace, DEFAULT_ADVICE_LIMITS)
    starts, ends = stall_intervals(ctx, ctx.windows[0])
    assert starts[0] == 0 and ends[0] == 600 * US
    finding = input_rule(ctx)
    assert finding.rule == "input_stall"
    injected = case.injected_ns * ka.STEPS
    assert abs(finding.saving_ns - injected) <= 0.10 * injected


def test_a_loop_whose_input_is_ready_has_no_stall():
    assert input_rule(build_context(ka.single(None).trace, DEFAULT_ADVICE_LIMITS)) is None


def test_a_stall_shorter_than_the_threshold_is_not_reported():
    limits = replace(DEFAULT_ADVICE_LIMITS, input_stall_min_us=10_000.0)
    assert input_rule(build_context(ka.single("input_stall").trace, limits)) is None
