"""What every rule reads: the steps as windows (or the whole trace when it has none), who
launched which device work, and the device time each window holds."""

from __future__ import annotations

import numpy as np

from tests.traces.atrace.analysis import known_answers as ka
from tests.traces.atrace.analysis.known_answers import US
from traces.atrace import TraceBuilder
from traces.atrace.analysis.advice import DEFAULT_ADVICE_LIMITS
from traces.atrace.analysis.advice.context import build_context, device_work, step_spans
from traces.atrace.model.trace import Kind


def test_each_profiler_step_is_a_window_in_time_order():
    trace = ka.single(None).trace
    names, spans = step_spans(trace)
    assert names == [f"ProfilerStep#{k}" for k in range(ka.STEPS)]
    assert (spans[:, 0] < spans[:, 1]).all() and (spans[1:, 0] >= spans[:-1, 1]).all()
    ctx = build_context(trace, DEFAULT_ADVICE_LIMITS)
    assert ctx.has_steps and ctx.of_each == "of each step"
    assert [w.name for w in ctx.windows] == names and ctx.scale == 1.0
    assert all(0 < w.busy_ns <= w.elapsed_ns for w in ctx.windows)


def test_every_kernel_knows_the_runtime_call_that_launched_it():
    trace = ka.single(None).trace
    ctx = build_context(trace, DEFAULT_ADVICE_LIMITS)
    kernels = np.flatnonzero(trace.kind == Kind.KERNEL)
    launchers = ctx.launcher[kernels]
    assert (launchers >= 0).all()
    assert set(trace.names(launchers)) == {"cudaLaunchKernel"}
    assert (trace.corr[launchers] == trace.corr[kernels]).all()
    assert device_work(trace)[kernels].all() and not device_work(trace)[launchers].any()


def test_a_trace_without_steps_is_analysed_as_one_window():
    b = TraceBuilder()
    host = b.track(1, 1)
    b.add("aten::mm", 0, 50 * US, host, kind=Kind.HOST_OP)
    b.add("aten::add", 60 * US, 10 * US, host, kind=Kind.HOST_OP)
    ctx = build_context(b.build(), DEFAULT_ADVICE_LIMITS)
    assert not ctx.has_steps and ctx.of_each == "of the time"
    (window,) = ctx.windows
    assert (window.start, window.end) == (0, 70 * US)
    assert len(window.dev) == 0
