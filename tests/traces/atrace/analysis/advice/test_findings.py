"""What the advisor answers: severities and verdicts from the thresholds, the one-line
summary, and the comparison of two stored answers."""

from __future__ import annotations

import pytest

from tests.traces.atrace.analysis import known_answers as ka
from traces.atrace import AdviceLimits, advise
from traces.atrace.analysis.advice.findings import (
    Evidence,
    Finding,
    compare_findings,
    severity,
    summary_line,
    verdict,
)

LIMITS = AdviceLimits()


def _finding(title: str) -> Finding:
    return Finding(
        rule="copies",
        severity="low",
        title=title,
        saving_ns=5_000,
        saving_share=0.05,
        saving_per_step_ns=None,
        measured={},
        evidence=Evidence(),
        action="pin the memory",
    )


@pytest.mark.parametrize(
    "share, word", [(0.25, "high"), (0.2499, "medium"), (0.10, "medium"), (0.05, "low")]
)
def test_severity_follows_the_share_of_the_path(share, word):
    assert severity(share, LIMITS) == word


def test_the_verdict_is_the_bound_that_holds_half_the_busy_time():
    assert verdict({"host": 0.6, "device": 0.4}, LIMITS) == "host-bound"
    assert verdict({"host": 0.3, "device": 0.3, "input": 0.4}, LIMITS) == "mixed"
    assert verdict({}, LIMITS) == "no work"
    assert verdict({"host": 0.0, "device": 0.0}, LIMITS) == "no work"


def test_the_summary_names_the_shares_and_the_top_finding_or_the_reason():
    line = summary_line(
        "device-bound", {"device": 0.7, "host": 0.3}, [_finding("Pageable copies")], 0.92
    )
    assert line == (
        "Device-bound (device 70%, host 30%); the device is busy 92% of the time. "
        "Top finding: Pageable copies"
    )
    quiet = summary_line("mixed", {"host": 0.4, "device": 0.4}, [], None, reason="Time is spread.")
    assert quiet.startswith("Mixed: no single bound holds half the time (")
    assert quiet.endswith("No finding crosses its threshold. Time is spread.")
    assert summary_line("no work", {}, [], None).startswith("No work to analyse")


def test_compare_findings_names_what_appeared_went_away_and_stayed():
    a = advise(ka.single(None).trace).to_dict()
    b = advise(ka.single("input_stall").trace).to_dict()
    diff = compare_findings(a, b)
    assert [f["rule"] for f in diff["appeared"]] == ["input_stall"] and diff["went_away"] == []
    back = compare_findings(b, a)
    assert [f["rule"] for f in back["went_away"]] == ["input_stall"] and back["appeared"] == []
    same = compare_findings(b, b)
    assert [f["rule"] for f in same["in_both"]] == ["input_stall"] and same["in_both"][0][
        "delta_us"
    ] == 0
    assert diff["verdict_a"] == a["verdict"] and diff["verdict_b"] == b["verdict"]
