"""Trace, job and rank states: the active ones can still change by themselves, the final
ones (ready, failed) cannot; a capture holds its device only until it is analysed."""

from traces.choices import (
    ACTIVE_STATUSES,
    CAPTURE_BUSY_STATUSES,
    JOB_ACTIVE_STATUSES,
    RANK_PENDING_STATUSES,
    JobStatus,
    RankStatus,
    TraceStatus,
)


def test_final_states_are_not_active():
    assert TraceStatus.READY not in ACTIVE_STATUSES and TraceStatus.FAILED not in ACTIVE_STATUSES
    assert set(ACTIVE_STATUSES) | {TraceStatus.READY, TraceStatus.FAILED} == set(TraceStatus)
    assert set(JOB_ACTIVE_STATUSES) | {JobStatus.READY, JobStatus.FAILED} == set(JobStatus)


def test_a_capture_holds_its_device_until_its_analysis_starts():
    assert set(CAPTURE_BUSY_STATUSES) == {TraceStatus.QUEUED, TraceStatus.CAPTURING}
    assert set(CAPTURE_BUSY_STATUSES) < set(ACTIVE_STATUSES)


def test_a_busy_or_failed_rank_does_not_keep_the_cross_rank_step_waiting():
    assert (
        RankStatus.BUSY not in RANK_PENDING_STATUSES
        and RankStatus.FAILED not in RANK_PENDING_STATUSES
    )
    assert RankStatus.ANALYSING in RANK_PENDING_STATUSES
    assert dict(RankStatus.choices)["busy"] == "Device busy"
