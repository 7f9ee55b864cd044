"""Rules about the host: launch-bound steps (1) and graph replays the host cannot keep fed
(8), each with the saving the known-answer trace injected, and silent on clean loops."""

from __future__ import annotations

import pytest

from tests.traces.atrace.analysis import known_answers as ka
from traces.atrace import advise
from traces.atrace.analysis.advice import DEFAULT_ADVICE_LIMITS
from traces.atrace.analysis.advice.context import build_context
from traces.atrace.analysis.advice.host import host_bound_rules


def _rules(case):
    return host_bound_rules(build_context(case.trace, DEFAULT_ADVICE_LIMITS))


@pytest.mark.parametrize(
    "case, rule",
    [
        (lambda: ka.single("launch_bound"), "launch_bound"),
        (lambda: ka.graph_loop(host_ahead=False), "graph_replays"),
    ],
    ids=["kernels launched one by one", "graph replays"],
)
def test_a_host_that_cannot_keep_the_device_fed_is_found_with_its_cost(case, rule):
    case = case()
    (finding,) = _rules(case)
    assert finding.rule == rule
    injected = case.injected_ns * ka.STEPS
    assert abs(finding.saving_ns - injected) <= 0.10 * injected
    assert finding.evidence.steps and finding.action


@pytest.mark.parametrize(
    "case",
    [
        lambda: ka.single(None),
        lambda: ka.graph_loop(host_ahead=True),
        lambda: ka.single("kernel_hotspot"),
    ],
    ids=["clean loop", "host ahead of its replays", "device-bound hotspot"],
)
def test_a_device_bound_loop_gets_no_host_finding(case):
    assert _rules(case()) == []


def test_a_graph_captured_loop_is_not_launch_bound():
    """The launch-bound rule counts kernels launched one by one: a loop replayed from
    graphs, even with tiny kernels, is not flagged by it."""
    for host_ahead in (True, False):
        assert advise(ka.graph_loop(host_ahead=host_ahead).trace).rule("launch_bound") is None
