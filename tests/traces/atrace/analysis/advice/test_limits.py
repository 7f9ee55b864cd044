"""Every threshold of the advisor in one frozen table: changing one changes the answer."""

from __future__ import annotations

from dataclasses import fields, replace

import pytest

from tests.traces.atrace.analysis import known_answers as ka
from traces.atrace import AdviceLimits, advise
from traces.atrace.analysis.advice import RULES


def test_rules_order_and_the_table_of_thresholds():
    assert set(RULES) >= set(ka.PROBLEMS) | {"straggler"}
    limits = AdviceLimits()
    names = {f.name for f in fields(AdviceLimits)}
    assert {"min_saving_share", "launch_bound_device_busy_below", "hotspot_kernel_share"} <= names
    with pytest.raises(AttributeError):
        limits.min_saving_share = 0.5  # frozen
    trace = ka.single("launch_bound").trace
    assert advise(trace).rule("launch_bound") is not None
    assert (
        advise(trace, limits=replace(limits, launch_bound_device_busy_below=0.01)).rule(
            "launch_bound"
        )
        is None
    )
    assert advise(trace, limits=replace(limits, min_saving_share=1.01)).findings == []


def test_the_severity_bands_are_ordered():
    limits = AdviceLimits()
    assert 0 < limits.min_saving_share < limits.medium_share < limits.high_share < 1
    assert 0 < limits.verdict_share <= 1
