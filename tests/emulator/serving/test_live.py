"""A live capture of a device that serves requests: the service runs in wall-clock time at the
device's clock as it is now, hands over each finished request, keeps whole steps within the
event budget, and stops when the device stops answering. The wall clock here moves only when
slept on, so a capture of seconds takes milliseconds."""

import numpy as np
import pytest

from emulator.serving.engine import ServingConfig
from emulator.serving.live import capture_serving_live
from emulator.workloads.tracing import DeviceHung, DeviceNow, capture_live
from traces.atrace.model.trace import Kind


class _FakeTime:
    """A wall clock that moves only when slept on (a live capture without the wait)."""

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self.now = start

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_a_live_capture_serves_in_wall_clock_time_at_the_device_s_clock():
    done, ended = [], []
    t = _FakeTime()
    cool = capture_serving_live(
        2.0,
        lambda s: DeviceNow(),
        config=ServingConfig(seed=1),
        on_done=done.append,
        on_end=ended.append,
        clock=t.clock,
        sleep=t.sleep,
    )
    assert ended and done and all(r.finished for r in done)
    assert (
        cool.trace.meta["workload"] == "llm_serving"
        and cool.iterations_kept == cool.iterations_run > 0
    )
    t = _FakeTime()
    hot_runs = []
    hot = capture_serving_live(
        2.0,
        lambda s: DeviceNow(faults=frozenset({"overheat"})),
        config=ServingConfig(seed=1),
        on_end=hot_runs.append,
        clock=t.clock,
        sleep=t.sleep,
    )

    def clocks(trace):
        return {
            trace.args.get(int(i))["clock_share"]
            for i in np.flatnonzero(trace.kind == Kind.COUNTER)
        }

    assert clocks(cool.trace) == {1.0} and clocks(hot.trace) == {0.5}
    # The same arrivals; at half the clock the same work takes twice the device time.
    step_hot, step_cool = hot_runs[0].steps[0], ended[0].steps[0]
    assert step_hot.tokens == step_cool.tokens
    assert step_hot.device_ns == pytest.approx(2 * step_cool.device_ns, rel=0.1)


def test_a_device_that_hangs_ends_the_live_capture_and_hands_over_what_it_finished():
    t = _FakeTime()
    hang_at = t.now + 1.0
    ended = []
    with pytest.raises(DeviceHung):
        capture_serving_live(
            2.0,
            lambda s: DeviceNow(faults=frozenset({"hang"}) if s >= hang_at else frozenset()),
            config=ServingConfig(seed=1),
            on_end=ended.append,
            clock=t.clock,
            sleep=t.sleep,
        )
    assert len(ended) == 1 and any(r.finished for r in ended[0].requests)


def test_past_the_event_budget_steps_still_run_and_are_counted_but_not_recorded():
    t, seen = _FakeTime(), []
    live = capture_serving_live(
        2.0,
        lambda s: DeviceNow(),
        config=ServingConfig(seed=1),
        max_events=2000,
        progress=lambda f, n: seen.append((f, n)),
        clock=t.clock,
        sleep=t.sleep,
    )
    assert 0 < live.iterations_kept < live.iterations_run
    assert len(live.trace) <= 2000 and live.trace.meta["iterations_kept"] == live.iterations_kept
    assert (live.trace.kind == Kind.KERNEL).sum() == 13 * live.iterations_kept  # whole steps only
    fractions = [f for f, _ in seen]
    assert fractions == sorted(fractions) and fractions[-1] == 1.0


def test_finished_requests_are_handed_over_in_arrival_order_as_they_finish():
    t, done, ended = _FakeTime(), [], []
    capture_serving_live(
        1.0,
        lambda s: DeviceNow(),
        config=ServingConfig(seed=2),
        on_done=done.append,
        on_end=ended.append,
        clock=t.clock,
        sleep=t.sleep,
    )
    finished = [r for r in ended[0].requests if r.finished]
    arrivals = [r.arrival_ns for r in done]
    assert arrivals == sorted(arrivals) and {r.id for r in done} <= {r.id for r in finished}
    assert len(done) >= len(finished) - ServingConfig().max_batch  # at most the last batch is left


def test_a_rebooting_device_stops_the_capture():
    t = _FakeTime()
    with pytest.raises(DeviceHung, match="stopped answering"):
        capture_serving_live(1.0, lambda s: DeviceNow(serving=False), clock=t.clock, sleep=t.sleep)


def test_the_workload_capture_hands_a_serving_device_over_to_the_service():
    t = _FakeTime()
    live = capture_live(
        "inference",
        1.0,
        lambda s: DeviceNow(),
        serving=capture_serving_live,
        clock=t.clock,
        sleep=t.sleep,
    )
    assert live.trace.meta["workload"] == "llm_serving" and live.iterations_run > 0
    assert live.trace.meta["start_epoch_s"] == pytest.approx(1_700_000_000.0)
    assert np.all(live.trace.ts >= int(1_700_000_000.0 * 1e9))
