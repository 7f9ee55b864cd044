"""The replay's clock and results."""

import pytest

from emulator.replay.model import JobResult, VirtualClock


def test_the_virtual_clock_only_moves_forward():
    clock = VirtualClock()
    assert clock.advance(10.0) == 10.0
    assert clock.advance(4.0) == 10.0  # an earlier time does not turn it back
    assert clock.now == 10.0


def test_a_job_s_ettr_is_its_productive_share_of_the_horizon():
    job = JobResult(size=4, productive_s=900.0)
    assert job.ettr(1000.0) == pytest.approx(0.9)
    assert job.ettr(0.0) == 1.0  # no time, nothing lost
