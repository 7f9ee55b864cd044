"""Helpers the rules share: turning per-window savings into a finding, operator tables and
the timeline window that shows the evidence."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...model.stats import us
from ...model.trace import Trace
from .context import Context, Window
from .findings import Evidence, Finding, severity


@dataclass
class Hit:
    """A rule's result in one window: the saving, and what shows it."""

    window: Window
    saving_ns: int
    events: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # most telling first
    spans: list[tuple[int, int]] = field(default_factory=list)  # where it happens, worst first


def make_finding(ctx: Context, rule: str, hits: list[Hit], *, title: str, measured: dict[str, Any],
                 operators: list[dict[str, Any]], action: str, cap_ns: int | None = None) -> Finding | None:
    """A finding from the windows where the rule held, if it saves enough of the path.

    The saving over the trace is the windows' saving scaled to every window (see
    :mod:`.context`); its share is of the critical path of the windows analysed.
    """
    hits = [h for h in hits if h.saving_ns > 0]
    if not hits:
        return None
    path = sum(w.model.length_ns for w in ctx.windows) or 1
    saved = sum(h.saving_ns for h in hits)
    if cap_ns is not None:
        saved = min(saved, cap_ns)
    share = saved / path
    if share < ctx.limits.min_saving_share:
        return None
    worst = max(hits, key=lambda h: h.saving_ns)
    events = [int(e) for e in worst.events[: ctx.limits.evidence_events].tolist()]
    spans = sorted((s for h in hits for s in h.spans[:5]), key=lambda s: s[0])[:50]
    evidence = Evidence(
        events=events,
        steps=[h.window.name for h in hits] if ctx.has_steps else [],
        windows_ns=spans,
        operators=operators,
        focus_ns=focus(ctx.trace, worst.events[: ctx.limits.evidence_events], worst.spans),
    )
    per_step = int(saved / len(ctx.windows)) if ctx.has_steps and ctx.windows else None
    return Finding(
        rule=rule,
        severity=severity(share, ctx.limits),
        title=title,
        saving_ns=int(saved * ctx.scale),
        saving_share=share,
        saving_per_step_ns=per_step,
        measured=measured,
        evidence=evidence,
        action=action,
    )


def focus(trace: Trace, events: np.ndarray, spans: list[tuple[int, int]]) -> tuple[int, int] | None:
    """The time window that shows the evidence: its events, or else its first span,
    with a margin of a tenth on each side."""
    if len(events):
        a, b = int(trace.ts[events].min()), int(trace.end[events].max())
    elif spans:
        a, b = spans[0]
    else:
        return None
    pad = max((b - a) // 10, 1000)
    return a - pad, b + pad


def op_rows(trace: Trace, events: np.ndarray, weights: np.ndarray | None = None, top: int = 5) -> list[dict[str, Any]]:
    """The operators of ``events`` by their summed weight (default: duration), largest first."""
    if not len(events):
        return []
    w = trace.dur[events] if weights is None else np.asarray(weights)
    ops = trace.op[events]
    uniq, inv = np.unique(ops, return_inverse=True)
    total = np.bincount(inv, weights=w, minlength=len(uniq))
    count = np.bincount(inv, minlength=len(uniq))
    side = np.zeros(len(uniq), bool)
    side[inv] = trace.on_device[events]
    s = trace.strings.strings
    rows = [{"op": s[int(uniq[j])], "side": "device" if side[j] else "host", "count": int(count[j]),
             "time_us": us(total[j])} for j in np.argsort(-total, kind="stable")[:top].tolist()]
    return [r for r in rows if r["time_us"] > 0] or rows[:1]


def pct(x: float) -> str:
    return f"{x:.0%}" if x >= 0.01 else f"{x:.1%}"


def per_step(ctx: Context, total_ns: float) -> float:
    """µs per analysed window."""
    return us(total_ns / max(len(ctx.windows), 1))


def spans_of(trace: Trace, events: np.ndarray, top: int = 5) -> list[tuple[int, int]]:
    """(start, end) of the longest of ``events``."""
    if not len(events):
        return []
    k = events[np.argsort(-trace.dur[events], kind="stable")[:top]]
    return [(int(trace.ts[e]), int(trace.end[e])) for e in k.tolist()]
