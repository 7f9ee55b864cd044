"""Rule 4: input stalls — the device idle at the start of a step while the host is in the
data loader or an input copy.

The stall is the time from the step's start (or from when the device finished the previous
step's work, if later) to the step's first device work, where the host's driving threads
are in input code (the data loader, collation, pinning, copies: ``context.INPUT_CODE``).
Its saving is the stall itself: while it lasts the device has nothing to do and the host
does nothing but load input, so every path through the step runs through it, and input
prepared ahead (by loader workers) removes it entirely.
"""

from __future__ import annotations

import numpy as np

from ...model.stats import us
from .common import Hit, make_finding, op_rows, pct
from .context import Context, Window
from .findings import Finding
from .words import duration


def stall_intervals(ctx: Context, w: Window) -> tuple[np.ndarray, np.ndarray]:
    """The window's input stall, as sorted disjoint (start, end) arrays (ns)."""
    key = ("stall", w.start, w.end)
    got = ctx.cache.get(key)
    if got is not None:
        return got
    empty = (np.zeros(0, np.int64), np.zeros(0, np.int64))
    t = ctx.trace
    got = empty
    if len(w.dev) and ctx.has_steps:  # without steps, the trace's start is setup, not input
        first = int(t.ts[w.dev].min())
        lead_start = max(w.start, ctx.tail.busy_until(w.start))
        if first > lead_start:
            s, e = ctx.input_intervals(w)
            s, e = np.maximum(s, lead_start), np.minimum(e, first)
            keep = e > s
            got = (s[keep], e[keep])
    ctx.cache[key] = got
    return got


def input_rule(ctx: Context) -> Finding | None:
    t = ctx.trace
    hits, code = [], []
    min_ns = ctx.limits.input_stall_min_us * 1000
    for w in ctx.windows:
        s, e = stall_intervals(ctx, w)
        stall = int((e - s).sum())
        if stall < min_ns:
            continue
        ev = ctx.input_events()
        ev = ev[np.isin(t.track[ev], w.drivers) & (t.ts[ev] < e.max()) & (t.end[ev] > s.min())]
        hits.append(Hit(w, stall, ev[np.argsort(-t.dur[ev], kind="stable")], list(zip(s.tolist(), e.tolist()))))
        code.append(ev)
    if not hits:
        return None
    stall = sum(h.saving_ns for h in hits)
    steps = len(ctx.windows)
    elapsed = sum(w.elapsed_ns for w in ctx.windows)
    ops = op_rows(t, np.concatenate(code))
    top = ops[0]["op"] if ops else "input code"
    measured = {
        "stall_per_step_us": us(stall / steps),
        "stall_total_us": us(stall),
        "steps_with_stall": len(hits),
        "steps_analysed": steps,
        "share_of_step_time": round(stall / max(elapsed, 1), 4),
    }
    title = (f"Input stall: the device waits {duration(stall / len(hits))} at the start of {len(hits)} of "
             f"{steps} steps ({pct(stall / max(elapsed, 1))} of the time) while the host is in {top}")
    action = ("Prepare input ahead of the step: DataLoader(num_workers>0, pin_memory=True, prefetch_factor, "
              "persistent_workers=True), copy batches with non_blocking=True (or on a side stream one step ahead), "
              "and move preprocessing off the training thread.")
    return make_finding(ctx, "input_stall", hits, title=title, measured=measured, operators=ops, action=action)
