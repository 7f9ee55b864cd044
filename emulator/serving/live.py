"""A live capture of a device that serves requests: the inference service runs in wall-clock
time while the capture lasts, at the device's clock as it is now (an overheating device
throttles its steps), each finished request's spans go out through ``on_done`` and the steps
are recorded into the trace, whole steps up to the event budget.

:func:`emulator.workloads.tracing.capture_live` hands over to :func:`capture_serving_live` when it is
given ``serving=``.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from emulator.serving.engine import ServingConfig, ServingEngine, ServingRun
from emulator.serving.trace import StepRecorder
from emulator.workloads.tracing import DeviceHung, DeviceNow, LiveCapture

__all__ = ["capture_serving_live", "OVERHEAT_CLOCK"]

US = 1000
OVERHEAT_CLOCK = 0.5  # clock share of an overheating (throttled) device


def _clock_of(device_now: Callable[[float], DeviceNow]) -> Callable[[int], float]:
    def clock(t_ns: int) -> float:
        state = device_now(t_ns / 1e9)
        if "hang" in state.faults or not state.serving:
            raise DeviceHung("the device stopped answering while it served requests")
        return min(state.clock_share, OVERHEAT_CLOCK if "overheat" in state.faults else 1.0)

    return clock


def capture_serving_live(
    duration_s: float,
    device_now: Callable[[float], DeviceNow],
    *,
    config: ServingConfig | None = None,
    on_done: Callable | None = None,
    on_end: Callable[[ServingRun], None] | None = None,
    max_events: int = 400_000,
    progress: Callable[[float, int], None] | None = None,
    clock: Callable[[], float] = time.time,
    sleep: Callable[[float], None] = time.sleep,
    device_type: str = "inference",
    **_ignored,
) -> LiveCapture:
    """Serve and trace the next ``duration_s`` seconds; ``on_done(request)`` as each request
    finishes, ``on_end(run)`` once at the end. Raises DeviceHung if the device hangs."""
    config = config or ServingConfig()
    start = int(clock() * 1e9)
    engine = ServingEngine(config, start, duration_s, device_clock=_clock_of(device_now))
    rec = StepRecorder(device_type)
    try:
        kept = _serve(engine, rec, config, on_done, max_events, progress, clock, sleep)
    finally:  # a device that hangs still hands over the requests it finished
        run = engine.result()
        if on_end is not None:
            on_end(run)
    rec.builder.meta.update(seed=config.seed, duration_s=duration_s, start_epoch_s=start / 1e9,
                            iterations_kept=kept, iterations_run=len(run.steps))
    if progress is not None:
        progress(1.0, rec.builder.count)
    return LiveCapture(rec.build(run), kept, len(run.steps), 0)


def _serve(engine: ServingEngine, rec: StepRecorder, config: ServingConfig, on_done, max_events: int,
           progress, clock, sleep) -> int:
    """Step the engine as wall-clock time passes until the capture ends; returns the steps
    recorded (whole steps within the event budget)."""
    start = engine.t0
    cursor, reported, stalls_seen, kept = start, 0, 0, 0
    while True:
        now = int(clock() * 1e9)
        while cursor < min(now, engine.end):
            step = engine.step(cursor)
            if step is None:
                cursor = engine.idle_until() or engine.end
                continue
            if rec.builder.count + 40 <= max_events:
                for s in engine.stalls[stalls_seen:]:
                    rec.stall(*s)
                rec.record(step, int(config.schedule_us * US))
                kept += 1
            stalls_seen = len(engine.stalls)
            cursor = step.end_ns + 30 * US
        reported = _report(engine, reported, on_done)
        if now >= engine.end:
            return kept
        if progress is not None:
            progress((now - start) / (engine.end - start), rec.builder.count)
        sleep(min(0.05, (engine.end - now) / 1e9))


def _report(engine: ServingEngine, reported: int, on_done) -> int:
    """Hand the requests finished so far, in arrival order, to ``on_done``."""
    if on_done is None:
        return reported
    while reported < len(engine.requests) and engine.requests[reported].finished:
        on_done(engine.requests[reported])
        reported += 1
    return reported
