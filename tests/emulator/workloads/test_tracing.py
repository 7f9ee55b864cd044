"""Trace capture from an emulated device: a live capture paced in wall-clock time at the device's
load, within its event budget, ended by a hang; and what a capture refuses. (What a capture in
emulated time records, and how the analyses read it, is tested in
tests/traces/atrace/test_emulator_tracing.py.) The wall clock here moves only when slept on."""

import numpy as np
import pytest

from emulator.workloads.tracing import DeviceHung, DeviceNow, capture, capture_live
from traces.atrace.model.trace import Kind

START = 1_700_000_000.0


class _FakeTime:
    def __init__(self) -> None:
        self.now = START
        self.slept = 0.0

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds
        self.slept += seconds


def _live(duration_s, device_now, **kwargs):
    t = _FakeTime()
    return capture_live("gpu", duration_s, device_now, clock=t.clock, sleep=t.sleep, **kwargs), t


def _steps(trace):
    return [i for i, name in enumerate(trace.names()) if name.startswith("step#")]


def test_a_live_capture_is_stamped_in_epoch_time_and_busy_as_the_device_is_loaded():
    half, t = _live(0.5, lambda s: DeviceNow(load=0.5))
    assert t.slept == pytest.approx(0.5, abs=0.11)  # it waited for the capture's wall-clock time
    assert half.trace.ts.min() >= int(START * 1e9) and half.trace.meta["start_epoch_s"] == START
    steps = _steps(half.trace)
    assert len(steps) == half.iterations_kept == half.iterations_run > 5
    busy = half.trace.dur[steps].sum()
    first, last = min(half.trace.ts[steps]), max(half.trace.end[steps])
    assert busy / (last - first) == pytest.approx(0.5, abs=0.05)
    full, _ = _live(0.5, lambda s: DeviceNow(load=1.0))
    assert full.iterations_run > 1.6 * half.iterations_run


def test_past_the_event_budget_whole_steps_are_kept_and_the_rest_counted():
    live, _ = _live(0.5, lambda s: DeviceNow(load=1.0), max_events=3000)
    assert 0 < live.iterations_kept < live.iterations_run and live.events_dropped > 0
    assert len(live.trace) <= 3000 and len(_steps(live.trace)) == live.iterations_kept
    assert live.trace.meta["iterations_run"] == live.iterations_run


def test_a_device_that_hangs_ends_the_live_capture_saying_when():
    with pytest.raises(DeviceHung, match=r"hung 0\.[23] s into the capture"):
        _live(
            1.0,
            lambda s: DeviceNow(faults=frozenset({"hang"}) if s >= START + 0.25 else frozenset()),
        )


def test_a_stuck_core_takes_no_work_and_shows_stalled_over_the_capture():
    trace = capture("gpu", 0.01, faults=["core_stuck"], seed=1)
    core0 = next(i for i, track in enumerate(trace.tracks) if track.thread_name == "core 0")
    on_core0 = np.flatnonzero(trace.track == core0)
    assert trace.names(on_core0) == ["core stalled"] and trace.dur[on_core0[0]] == 0.01e9
    others = (trace.kind == Kind.KERNEL) & (trace.track != core0)
    assert others.sum() > 10


def test_a_capture_cut_by_its_event_budget_says_so():
    trace = capture("gpu", 0.05, max_events=500)
    assert trace.meta["truncated_at_events"] == 500 and len(trace) < 1000
    assert "truncated_at_events" not in capture("gpu", 0.002).meta


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: capture("gpu", 0), "duration_s must be positive"),
        (lambda: capture("gpu", 0.01, problems=["slow_disk"]), "unknown problems"),
        (
            lambda: capture_live("gpu", 0, lambda s: DeviceNow()),
            r"duration_s must be in \(0, 3600\]",
        ),
        (
            lambda: capture_live("gpu", 3601, lambda s: DeviceNow()),
            r"duration_s must be in \(0, 3600\]",
        ),
        (lambda: _live(0.2, lambda s: DeviceNow(faults=frozenset({"gremlins"}))), "unknown faults"),
    ],
)
def test_what_a_capture_cannot_do_is_refused(call, message):
    with pytest.raises(ValueError, match=message):
        call()
