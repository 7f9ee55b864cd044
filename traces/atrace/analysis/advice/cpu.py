"""Rule 9, for traces without device work (CPU-only runs): where the CPU time goes — the
operators with the most self time (with their input shapes when recorded), how the work is
spread over the threads, and the shares of the data loader and of Python code.

The hot operators are the fewest (at most ``hotspot_max_kernels``) that hold
``hotspot_kernel_share`` of the host operators' self time, else the top one. The saving is
the wall time their calls cover (the union of their intervals, on every thread): an upper
bound of what making them free would recover, since other threads may run meanwhile.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...model.stats import merge_intervals, us
from .account import host_events
from .common import focus
from .context import Context
from .findings import Evidence, Finding, severity
from .words import duration, plural, share


def cpu_rule(ctx: Context, acc: dict[str, Any]) -> Finding | None:
    if not acc or acc["device"] or not acc["host_operators"] or acc["time_us"] <= 0:
        return None
    t = ctx.trace
    rows = acc["host_operators"]
    hot = _hot(rows, ctx.limits.hotspot_kernel_share, ctx.limits.hotspot_max_kernels)
    names = {r["op"] for r in hot}
    ids = [t.strings.lookup(n) for n in names]
    ev = np.flatnonzero(np.isin(t.name, ids) & ~t.on_device & t.is_slice)
    ev = np.intersect1d(ev, np.concatenate([host_events(ctx, w, False) for w in ctx.windows]))
    s, e = merge_intervals(t.ts[ev], t.end[ev])
    time_ns = acc["time_us"] * 1000
    saving = int(min((e - s).sum(), time_ns))
    ratio = saving / time_ns
    if ratio < ctx.limits.min_saving_share:
        return None
    threads = _threads(t, ev)
    parts = {p["part"]: p["share"] for p in acc["parts"]}
    measured = {
        "operators": hot,
        "share_of_self_time": round(sum(r["share_of_self_time"] for r in hot), 4),
        "threads": threads,
        "thread_imbalance": _imbalance(threads),
        "input_share": parts.get("input", 0.0),
        "python_share": round(parts.get("python", 0.0) + parts.get("annotated", 0.0), 4),
        "collectives_share": parts.get("host_collective", 0.0),
    }
    top = hot[0]
    shapes = f", shapes {top['shapes']}" if top.get("shapes") else ""
    title = (f"CPU hotspot: {top['op']} runs {duration(top['self_us'] * 1000)} of self time in {plural(top['count'], 'call')} "
             f"on {top['threads']} thread{'s' if top['threads'] > 1 else ''}{shapes}"
             + (f" (with {', '.join(r['op'] for r in hot[1:])})" if len(hot) > 1 else "")
             + f"; its calls cover {share(ratio)} of the time" + _also(measured))
    order = ev[np.argsort(-t.dur[ev], kind="stable")][: ctx.limits.evidence_events]
    evidence = Evidence(events=[int(x) for x in order.tolist()], windows_ns=list(zip(s[:50].tolist(), e[:50].tolist())),
                        operators=[{"op": r["op"], "side": "host", "count": r["count"], "time_us": r["self_us"]}
                                   for r in hot], focus_ns=focus(t, order, []))
    return Finding(rule="cpu_hotspot", severity=severity(ratio, ctx.limits), title=title, saving_ns=saving,
                   saving_share=ratio, saving_per_step_ns=None, measured=measured, evidence=evidence,
                   action=_action(top["op"], measured))


def _hot(rows: list[dict], want: float, most: int) -> list[dict]:
    out, held = [], 0.0
    for r in rows[:most]:
        out.append(r)
        held += r["share_of_self_time"]
        if held >= want:
            break
    return out if held >= want else rows[:1]


def _threads(t, ev: np.ndarray) -> list[dict]:
    """Per host thread with any slice: its busy time (union of its slices)."""
    host = np.flatnonzero(~t.on_device & t.is_slice)
    rows = []
    for track in np.unique(t.track[host]).tolist():
        mine = host[t.track[host] == track]
        s, e = merge_intervals(t.ts[mine], t.end[mine])
        rows.append({"thread": t.tracks[track].label if t.tracks else str(track), "busy_us": us((e - s).sum()),
                     "hot_calls": int((t.track[ev] == track).sum())})
    rows.sort(key=lambda r: -r["busy_us"])
    return rows[:16]


def _imbalance(threads: list[dict]) -> float | None:
    busy = [r["busy_us"] for r in threads if r["busy_us"] > 0]
    return round(max(busy) / (sum(busy) / len(busy)), 2) if len(busy) > 1 else None


def _also(m: dict) -> str:
    notes = []
    if m["input_share"] >= 0.1:
        notes.append(f"the data loader holds {share(m['input_share'])} of the time")
    if m["python_share"] >= 0.1:
        notes.append(f"Python code outside operators {share(m['python_share'])}")
    if m["thread_imbalance"] and m["thread_imbalance"] >= 1.5:
        notes.append(f"the busiest thread works {m['thread_imbalance']:.1f}× the mean of the threads")
    return ("; " + ", ".join(notes)) if notes else ""


def _action(op: str, m: dict) -> str:
    if any(op.lower().startswith(p) for p in ("gloo:", "nccl:", "c10d", "mpi:")):
        return ("The run spends its time in collectives on the CPU: overlap them with computation (async_op=True), "
                "send fewer or larger buckets, or run the collectives on a device backend.")
    out = [f"Profile {op} first: check its input shapes, its dtype and its thread count "
           "(torch.set_num_threads, OMP_NUM_THREADS); batch small calls; use a fused or compiled version "
           "(torch.compile)."]
    if m["input_share"] >= 0.1:
        out.append("Load input in DataLoader workers (num_workers>0) so that the main thread does not wait.")
    if m["thread_imbalance"] and m["thread_imbalance"] >= 1.5:
        out.append("Spread the work over the threads more evenly.")
    return " ".join(out)
