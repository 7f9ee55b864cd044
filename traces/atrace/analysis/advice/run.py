"""``advise(trace)``: the windows, every rule, the verdict (see the package's notes)."""

from __future__ import annotations

from ...model.stats import us
from ...model.trace import Trace
from ..whatif import communication_on_path
from .account import account
from .context import Context, build_context
from .cpu import cpu_rule
from .device import communication_rule, copies_rule, hotspot_rule
from .engine import engine_rules, one_replay_finding
from .findings import BOUNDS, RULES, Findings, summary_line, verdict
from .host import host_bound_rules
from .inference import inference_facts
from .inputs import input_rule, stall_intervals
from .limits import ADVICE_LIMIT_NAMES, DEFAULT_ADVICE_LIMITS, AdviceLimits
from .waits import host_wait_rule


def advise(trace: Trace, *, limits: AdviceLimits = DEFAULT_ADVICE_LIMITS) -> Findings:
    """The findings of one trace (one rank), largest estimated saving first."""
    ctx = build_context(trace, limits)
    shares = path_shares(ctx)
    found = [
        *host_bound_rules(ctx),
        host_wait_rule(ctx),
        communication_rule(ctx),
        input_rule(ctx),
        copies_rule(ctx),
        hotspot_rule(ctx, shares.get("device", 0.0)),
        *engine_rules(ctx),
    ]
    found = one_replay_finding(found)
    busy = _device_busy(ctx)
    acc = account(ctx) if ctx.windows else {}
    facts = inference_facts(ctx) if ctx.windows else {}
    if facts:
        acc = {**acc, "inference": facts, "lines": [*acc["lines"], *facts["lines"]]}
    found.append(cpu_rule(ctx, acc))
    findings = sorted((f for f in found if f is not None), key=lambda f: (-f.saving_ns, RULES.index(f.rule)))
    word, reason = supported_verdict(verdict(shares, limits), acc, findings, limits)
    return Findings(
        verdict=word,
        summary=summary_line(word, shares, findings, busy, reason),
        shares=shares,
        findings=findings,
        scope=scope(ctx, busy),
        account=acc,
        reason=reason,
    )


def supported_verdict(word: str, acc: dict, findings: list, limits: AdviceLimits) -> tuple[str, str]:
    """The verdict, checked against the account of the time, and the reason it holds: a
    trace without device work is "cpu-only"; a device-bound verdict needs the device busy
    at least ``verdict_share`` of the time, a host-bound one host activity in most of the
    device's idle time; else the verdict is "mixed" or "unclear", saying why."""
    if word == "no work" or not acc:
        return word, ""
    parts = {p["part"]: p["share"] for p in acc["parts"]}
    where = acc["lines"][0]
    if not acc["device"]:
        return "cpu-only", where
    busy = sum(parts.get(k, 0.0) for k in ("kernels", "copies", "communication"))
    nothing = parts.get("nothing", 0.0)
    idle = max(1.0 - busy, 0.0)
    if word == "device-bound" and busy < limits.verdict_share:
        return "mixed", (f"The critical path runs mostly through device work and the waits for it, yet the "
                         f"device is busy only {busy:.0%} of the time. {where}")
    if word in ("host-bound", "input-bound") and idle and nothing > idle / 2:
        return "unclear", (f"The device idles {idle:.0%} of the time, and for {nothing:.0%} of the time the "
                           "trace records nothing on the host threads that drive it (code the profiler "
                           f"does not see, or a gap in the recording). {where}")
    if findings and findings[0].saving_share >= limits.verdict_share / 2:
        return word, findings[0].title
    return word, where


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
        "origin_us": us(ctx.trace.span()[0]),  # the trace's start: evidence windows are read from it
        "windows_analysed": [w.name for w in ctx.windows],
        "scale": round(ctx.scale, 4),
        "path_us": us(sum(w.model.length_ns for w in ctx.windows)),
        "elapsed_us": us(sum(w.elapsed_ns for w in ctx.windows)),
        "device_busy_share": round(busy, 4) if busy is not None else None,
        "limits": {name: getattr(ctx.limits, name) for name in ADVICE_LIMIT_NAMES},
    }

