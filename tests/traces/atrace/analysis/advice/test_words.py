"""How the advisor writes times, shares and counts."""

from __future__ import annotations

import pytest

from traces.atrace.analysis.advice.words import (
    at,
    duration,
    duration_us,
    plural,
    share,
    times,
    window,
)


@pytest.mark.parametrize(
    "ns, text",
    [(12_340, "12.3 µs"), (4_560_000, "4.56 ms"), (1_230_000_000, "1.23 s"), (999_000, "999.0 µs")],
)
def test_a_duration_is_written_in_the_unit_its_size_calls_for(ns, text):
    assert duration(ns) == text


def test_microseconds_and_moments_relative_to_the_start():
    assert duration_us(2500) == "2.50 ms"
    assert at(1_500_000_000, origin_ns=300_000_000) == "1.20 s"
    assert at(100, origin_ns=1_000) == "0.0 µs"  # never before the start
    assert window(1_200_000_000, 1_350_000_000, 0) == "1.20 s to 1.35 s"


def test_shares_counts_and_plurals_read_as_words():
    assert share(0.42) == "42%" and share(0.004) == "0.4%" and share(0) == "0%"
    assert (
        times(1) == "once" and times(2, "per step") == "twice per step" and times(12) == "12 times"
    )
    assert times(0.5) == "0.5 times"
    assert plural(1, "kernel") == "1 kernel" and plural(1200, "kernel") == "1,200 kernels"
    assert plural(3, "copy", "copies") == "3 copies"
