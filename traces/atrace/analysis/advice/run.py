"""``advise(trace)``: the windows, every rule, the verdict (see the package's notes)."""

from __future__ import annotations

from ...model.stats import us
from ...model.trace import Trace
from ..whatif import communication_on_path
from .context import Context, build_context
from .device import communication_rule, copies_rule, hotspot_rule
from .findings import BOUNDS, RULES, Findings, summary_line, verdict
from .host import host_bound_rules, sync_rule
from .inputs import input_rule, stall_intervals
from .limits import ADVICE_LIMIT_NAMES, DEFAULT_ADVICE_LIMITS, AdviceLimits


def advise(trace: Trace, *, limits: AdviceLimits = DEFAULT_ADVICE_LIMITS) -> Findings:
    """The findings of one trace (one rank), largest estimated saving first."""
    ctx = build_context(trace, limits)
    shares = path_shares(ctx)
    found = [
        *host_bound_rules(ctx),
        sync_rule(ctx),
        communication_rule(ctx),
        input_rule(ctx),
        copies_rule(ctx),
        hotspot_rule(ctx, shares.get("device", 0.0)),
    ]
    findings = sorted((f for f in found if f is not None), key=lambda f: (-f.saving_ns, RULES.index(f.rule)))
    word = verdict(shares, limits)
    busy = _device_busy(ctx)
    return Findings(
        verdict=word,
        summary=summary_line(word, shares, findings, busy),
        shares=shares,
        findings=findings,
        scope=scope(ctx, busy),
    )


def path_shares(ctx: Context) -> dict[str, float]:
    """How the critical path of the analysed windows splits between the bounds: host
    (operators, framework time, launch latency), device (computation and copies, the host's
    waits for them, launches queued behind busy devices), communication, input (rule 4's
    stalls); idle time aside.

    The host (input included) is blamed for at most the time the devices were idle: while
    one is busy, a faster host would not end the window sooner than its work does."""
    total = dict.fromkeys(BOUNDS, 0.0)
    for w in ctx.windows:
        b = w.model.bounds_ns
        comm = min(communication_on_path(w.model), b["device"])
        stall = stall_intervals(ctx, w)
        stall_ns = float((stall[1] - stall[0]).sum())
        queued = min(w.model.queued_busy_ns, b["launch_queueing"])
        host = b["host"] + b["launch_queueing"] - queued
        device = max(b["device"] - comm, 0) + b["sync_wait"] + queued
        idle = max(w.elapsed_ns - w.busy_ns, 0) if len(w.dev) else host + stall_ns
        inputs = min(stall_ns, host, idle) if host else min(stall_ns, idle)
        blamed = min(max(host - inputs, 0), idle - inputs)
        total["input"] += inputs
        total["host"] += blamed
        total["communication"] += comm
        total["device"] += device + (host - inputs - blamed if host > inputs else 0)
    busy = sum(total.values())
    return {k: v / busy for k, v in total.items()} if busy else {}


def _device_busy(ctx: Context) -> float | None:
    busy = sum(w.busy_ns for w in ctx.windows)
    elapsed = sum(w.elapsed_ns for w in ctx.windows)
    has_device = any(len(w.dev) for w in ctx.windows)
    return busy / elapsed if has_device and elapsed else None


def scope(ctx: Context, busy: float | None) -> dict:
    return {
        "steps": len(ctx.step_names) if ctx.has_steps else 0,
        "windows_analysed": [w.name for w in ctx.windows],
        "scale": round(ctx.scale, 4),
        "path_us": us(sum(w.model.length_ns for w in ctx.windows)),
        "elapsed_us": us(sum(w.elapsed_ns for w in ctx.windows)),
        "device_busy_share": round(busy, 4) if busy is not None else None,
        "limits": {name: getattr(ctx.limits, name) for name in ADVICE_LIMIT_NAMES},
    }

