"""Emulated captures with a problem (``capture(..., problems=)``): the advisor finds it, with
the size it costs, against a clean twin captured with the same seed."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from emulator.workloads.graph import COST_PROFILES, register_cost_profile
from emulator.workloads.tracing import PROBLEMS, capture
from traces.atrace import advise
from traces.atrace.analysis.paths.tables import step_list

RULE = {"launch_bound": "launch_bound", "host_sync": "host_sync", "pageable_copies": "copies",
        "input_stall": "input_stall"}


def _step_us(trace) -> float:
    """Mean step time, the first and last step aside (cut by the capture's ends)."""
    return float(np.mean([s["dur_us"] for s in step_list(trace)[1:-1]]))


@pytest.fixture(scope="module")
def decode_twin():
    """The decode workload without the eager Python loop's overhead: launch_bound's twin."""
    register_cost_profile("gpu-decode", replace(COST_PROFILES["gpu"], workload="decode"))
    yield capture("gpu-decode", 0.05, seed=3)
    COST_PROFILES.pop("gpu-decode")


@pytest.mark.parametrize("device", ["gpu", "inference"])
@pytest.mark.parametrize("problem", ["input_stall", "host_sync"])
def test_the_problem_is_found_with_its_injected_size(device, problem):
    clean = advise(capture(device, 0.02, seed=3))
    trace = capture(device, 0.02, seed=3, problems=[problem])
    found = advise(trace)
    f = found.rule(RULE[problem])
    assert f is not None, found.rules
    injected = trace.meta["problems"][problem]  # µs per step
    assert f.saving_per_step_ns / 1000 == pytest.approx(injected, rel=0.10)
    # Nothing else appears but, at most, a hotspot: with the host waiting, the device's
    # top kernels may come onto the path enough to cross the threshold.
    assert set(found.rules) - set(clean.rules) - {"kernel_hotspot"} == {RULE[problem]}
    assert problem == "host_sync" or f.saving_per_step_ns / 1000 == pytest.approx(
        _step_us(trace) - _step_us(capture(device, 0.02, seed=3)), rel=0.10)


def test_a_launch_bound_decode_loop(decode_twin):
    trace = capture("gpu", 0.05, seed=3, problems=["launch_bound"])
    found = advise(trace)
    assert found.verdict == "host-bound" and found.rules == ["launch_bound"]
    f = found.rule("launch_bound")
    assert f.title.startswith("Launch-bound")
    assert f.measured["kernels_shorter_than_launch_share"] > 0.9
    # What the Python loop costs: the step against the same decode without it.
    loss = _step_us(trace) - _step_us(decode_twin)
    assert f.saving_per_step_ns / 1000 == pytest.approx(loss, rel=0.10)
    assert advise(decode_twin).rule("launch_bound") is None


def test_pageable_copies():
    """The copy calls block until the transfer is done. The what-if keeps the captured order
    of what the host launched after them, so it finds most of what the twin's steps gain."""
    clean = capture("inference", 0.02, seed=3)
    trace = capture("inference", 0.02, seed=3, problems=["pageable_copies"])
    found = advise(trace)
    f = found.rule("copies")
    assert f is not None and advise(clean).rule("copies") is None
    assert f.measured["pageable_or_blocking_per_step"] == 3
    loss = _step_us(trace) - _step_us(clean)
    assert 0.7 * loss <= f.saving_per_step_ns / 1000 <= 1.1 * loss


def test_problems_are_checked_and_recorded():
    with pytest.raises(ValueError, match="unknown problems"):
        capture("gpu", 0.01, problems=["gremlins"])
    trace = capture("gpu", 0.01, problems=PROBLEMS)
    assert set(trace.meta["problems"]) == set(PROBLEMS)
    assert "problems" not in capture("gpu", 0.01).meta
