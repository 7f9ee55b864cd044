"""Communication: the device time split into computation, communication and memory, how much
of the communication hides behind computation, and the table of collectives."""

from __future__ import annotations

import pytest

from tests.traces.atrace.analysis import known_answers as ka
from traces.atrace.analysis.communication import communication, overlap


@pytest.fixture(scope="module")
def twins():
    """The same all-reduce (1 ms a step): after the forward pass, and during it."""
    return ka.single("exposed_communication").trace, ka.single("clean_communication").trace


def test_communication_during_computation_is_hidden_and_after_it_is_exposed(twins):
    exposed, hidden = twins
    assert overlap(exposed) == {"communication_ns": ka.STEPS * 1_000_000, "overlapped_ns": 0}
    assert overlap(hidden) == {
        "communication_ns": ka.STEPS * 1_000_000,
        "overlapped_ns": ka.STEPS * 1_000_000,
    }
    assert (
        communication(exposed)["overlap"]["share"] == 0.0
        and communication(hidden)["overlap"]["share"] == 1.0
    )


def test_the_split_adds_up_to_the_device_work_and_names_each_collective(twins):
    c = communication(twins[0])
    split = c["split"]
    assert sum(part["time_us"] for part in split.values()) == pytest.approx(c["device_work_us"])
    assert sum(part["share"] for part in split.values()) == pytest.approx(1.0, abs=1e-5)
    assert split["communication"] == {
        "count": ka.STEPS,
        "time_us": ka.STEPS * 1000.0,
        "share": round(ka.STEPS * 1000.0 / c["device_work_us"], 6),
    }
    (row,) = c["collectives"]
    assert (row["collective"], row["count"], row["time_us"]) == (
        "allreduce",
        ka.STEPS,
        ka.STEPS * 1000.0,
    )


def test_a_window_counts_only_the_work_that_starts_in_it(twins):
    trace = twins[0]
    t0, t1 = trace.span()
    first_half = communication(trace, window=(t0, (t0 + t1) // 2))
    assert 0 < first_half["split"]["communication"]["count"] < ka.STEPS
    assert first_half["device_work_us"] < communication(trace)["device_work_us"]
    assert overlap(trace, window=(t1, t1 + 1)) == {"communication_ns": 0, "overlapped_ns": 0}
