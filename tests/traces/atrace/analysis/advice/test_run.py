"""``advise``: the path's shares between the bounds, the verdict checked against the
account of the time, and the scope of what was analysed."""

from __future__ import annotations

import pytest

from tests.traces.atrace.analysis import known_answers as ka
from traces.atrace.analysis.advice import DEFAULT_ADVICE_LIMITS
from traces.atrace.analysis.advice.context import build_context
from traces.atrace.analysis.advice.run import advise, path_shares, scope, supported_verdict


@pytest.mark.parametrize(
    "problem, bound",
    [
        ("input_stall", "input"),
        ("exposed_communication", "communication"),
        ("kernel_hotspot", "device"),
    ],
)
def test_the_shares_add_up_and_the_problem_shows_in_its_bound(problem, bound):
    shares = path_shares(build_context(ka.single(problem).trace, DEFAULT_ADVICE_LIMITS))
    assert sum(shares.values()) == pytest.approx(1.0)
    clean = path_shares(build_context(ka.single(None).trace, DEFAULT_ADVICE_LIMITS))
    assert shares[bound] > clean[bound]


def test_the_scope_says_which_windows_were_analysed_under_which_limits():
    ctx = build_context(ka.single(None).trace, DEFAULT_ADVICE_LIMITS)
    got = scope(ctx, 0.75)
    assert got["steps"] == ka.STEPS and got["windows_analysed"] == [
        f"ProfilerStep#{k}" for k in range(ka.STEPS)
    ]
    assert (
        got["device_busy_share"] == 0.75
        and got["limits"]["verdict_share"] == DEFAULT_ADVICE_LIMITS.verdict_share
    )
    assert 0 < got["path_us"] <= got["elapsed_us"]


def _account(**parts) -> dict:
    return {
        "device": True,
        "parts": [{"part": k, "share": v} for k, v in parts.items()],
        "lines": ["where"],
    }


def test_a_verdict_the_account_does_not_support_is_softened_with_its_reason():
    limits = DEFAULT_ADVICE_LIMITS
    word, reason = supported_verdict(
        "device-bound", _account(kernels=0.3, operators=0.7), [], limits
    )
    assert word == "mixed" and "busy only 30%" in reason
    word, reason = supported_verdict("host-bound", _account(kernels=0.2, nothing=0.7), [], limits)
    assert word == "unclear" and "records nothing" in reason
    assert supported_verdict("host-bound", {**_account(), "device": False}, [], limits) == (
        "cpu-only",
        "where",
    )
    assert supported_verdict("device-bound", _account(kernels=0.9), [], limits) == (
        "device-bound",
        "where",
    )


def test_the_summary_of_a_problem_trace_leads_with_its_finding():
    found = advise(ka.single("input_stall").trace)
    assert found.verdict in ("device-bound", "input-bound", "mixed")
    assert found.findings[0].rule == "input_stall"
    assert found.findings[0].title in found.summary
