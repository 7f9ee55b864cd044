"""Helpers the rules share: a finding made from per-window savings (or none below the
threshold), the operators of some events, and the window that shows the evidence."""

from __future__ import annotations

import numpy as np
import pytest

from tests.traces.atrace.analysis import known_answers as ka
from traces.atrace.analysis.advice import DEFAULT_ADVICE_LIMITS
from traces.atrace.analysis.advice.common import Hit, focus, make_finding, op_rows, pct, spans_of
from traces.atrace.analysis.advice.context import build_context
from traces.atrace.model.trace import Kind


def _ctx():
    return build_context(ka.single(None).trace, DEFAULT_ADVICE_LIMITS)


def test_savings_over_the_windows_make_one_finding_sized_by_the_path():
    ctx = _ctx()
    path = sum(w.model.length_ns for w in ctx.windows)
    hits = [
        Hit(w, path // 10 // len(ctx.windows), np.array([0]), [(w.start, w.end)])
        for w in ctx.windows
    ]
    f = make_finding(ctx, "copies", hits, title="t", measured={}, operators=[], action="a")
    assert f.saving_share == pytest.approx(0.1, abs=1e-3)
    assert f.severity == "medium" and f.evidence.steps == [w.name for w in ctx.windows]
    assert f.saving_per_step_ns == f.saving_ns // len(ctx.windows)


def test_a_saving_under_the_threshold_makes_no_finding():
    ctx = _ctx()
    hits = [Hit(ctx.windows[0], 1), Hit(ctx.windows[1], 0)]
    assert (
        make_finding(ctx, "copies", hits, title="t", measured={}, operators=[], action="a") is None
    )
    assert make_finding(ctx, "copies", [], title="t", measured={}, operators=[], action="a") is None


def test_operator_rows_and_spans_rank_the_longest_first():
    trace = ka.single("kernel_hotspot").trace
    kernels = np.flatnonzero(trace.kind == Kind.KERNEL)
    rows = op_rows(trace, kernels, top=2)
    assert rows[0]["op"] == "sm90_hot_attention_kernel" and rows[0]["side"] == "device"
    assert rows[0]["count"] == ka.STEPS and len(rows) == 2
    longest = spans_of(trace, kernels, top=1)
    assert longest[0][1] - longest[0][0] == trace.dur[kernels].max()
    assert (
        op_rows(trace, np.zeros(0, np.int64)) == [] and spans_of(trace, np.zeros(0, np.int64)) == []
    )


def test_the_focus_pads_the_evidence_by_a_tenth_and_percentages_keep_small_shares():
    trace = ka.single(None).trace
    e = np.flatnonzero(trace.kind == Kind.KERNEL)[:1]
    a, b = int(trace.ts[e[0]]), int(trace.end[e[0]])
    pad = max((b - a) // 10, 1000)
    assert focus(trace, e, []) == (a - pad, b + pad)
    assert focus(trace, np.zeros(0, np.int64), [(0, 100_000)]) == (-10_000, 110_000)
    assert focus(trace, np.zeros(0, np.int64), []) is None
    assert pct(0.25) == "25%" and pct(0.004) == "0.4%"
