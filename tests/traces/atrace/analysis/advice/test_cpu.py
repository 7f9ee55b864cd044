"""Rule 9, traces without device work: a CPU-only run gets its hot operators (with their
shapes), how they spread over threads and the data loader's share, not "host-bound"."""

from __future__ import annotations

import pytest

from tests.traces.atrace.analysis import known_answers as ka
from tests.traces.atrace.analysis.known_answers import US
from traces.atrace import TraceBuilder, advise
from traces.atrace.analysis.advice import DEFAULT_ADVICE_LIMITS
from traces.atrace.analysis.advice.context import build_context
from traces.atrace.analysis.advice.cpu import cpu_rule
from traces.atrace.model.trace import Kind

STEPS = 4


def _cpu_only():
    """Two threads: the main one runs aten::mm (the hot operator) and aten::add in a Python
    frame after a data-loader fetch; a worker thread runs a little aten::mm too."""
    b = TraceBuilder(source="kineto")
    main = b.track(1, 1, process_name="python", thread_name="thread 1 (python)")
    worker = b.track(1, 2, process_name="python", thread_name="thread 2")
    t = 0
    for k in range(STEPS):
        start = t
        b.add(
            "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__",
            t,
            300 * US,
            main,
            kind=Kind.ANNOTATION,
            cat="user_annotation",
        )
        t += 300 * US
        b.add("train.py(12): forward", t, 1100 * US, main, kind=Kind.PYTHON, cat="python_function")
        b.add(
            "aten::mm",
            t + 50 * US,
            800 * US,
            main,
            kind=Kind.HOST_OP,
            cat="cpu_op",
            args={"Input Dims": [[512, 1024], [1024, 1024]]},
        )
        b.add(
            "aten::add",
            t + 900 * US,
            100 * US,
            main,
            kind=Kind.HOST_OP,
            cat="cpu_op",
            args={"Input Dims": [[512, 1024], [512, 1024]]},
        )
        b.add(
            "aten::mm",
            t + 100 * US,
            100 * US,
            worker,
            kind=Kind.HOST_OP,
            cat="cpu_op",
            args={"Input Dims": [[64, 64], [64, 64]]},
        )
        t += 1100 * US
        b.add(
            f"ProfilerStep#{k}", start, t - start, main, kind=Kind.ANNOTATION, cat="user_annotation"
        )
        t += 10 * US
    return b.build()


def test_a_cpu_only_run_gets_its_hot_operators_not_host_bound():
    found = advise(_cpu_only())
    assert found.verdict == "cpu-only"
    f = found.rule("cpu_hotspot")
    assert f is not None and found.findings[0] is f
    hot = f.measured["operators"][0]
    assert hot["op"] == "aten::mm" and hot["self_us"] == pytest.approx(STEPS * 900)
    assert hot["shapes"] == [[512, 1024], [1024, 1024]] and hot["threads"] == 2
    assert f.measured["input_share"] == pytest.approx(300 / 1410, abs=0.01)
    # The account adds up to the steps' time: data loader, operators, Python, the gaps.
    parts = {p["part"]: p["time_us"] for p in found.account["parts"]}
    assert sum(parts.values()) == pytest.approx(STEPS * 1400, abs=1)
    assert parts["operators"] == pytest.approx(STEPS * 900) and parts["python"] == pytest.approx(
        STEPS * 200
    )
    assert "aten::mm" in f.title and "[[512,1024],[1024,1024]]" in found.account["lines"][1]
    assert f.evidence.events and f.evidence.focus_ns


def test_a_trace_with_device_work_gets_no_cpu_finding():
    trace = ka.single(None).trace
    found = advise(trace)
    assert cpu_rule(build_context(trace, DEFAULT_ADVICE_LIMITS), found.account) is None
    assert found.rule("cpu_hotspot") is None
