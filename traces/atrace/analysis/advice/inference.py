"""What an inference engine's trace shows, recognised from its events (never from file
names): decode loops replayed from CUDA/HIP graphs (graph launches and the device work they
replay), the prefill and decode phases (ranges or operators so named), KV-cache copies
(kernels, copies and operators that write or move cache blocks).

``inference_facts(ctx)`` returns, over the analysed windows: the graph replays, how many run
back to back on the device (the next replay starts within ``BACK_TO_BACK_NS`` of the end of
the previous one) and the gaps between the others, the host's time between consecutive
graph launches (its scheduling between decode steps); the time in prefill and decode
ranges; the KV-cache work. Empty when the trace shows none of these.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from ...model.stats import merge_intervals, us
from ...model.trace import Kind
from .context import Context
from .words import duration, share

BACK_TO_BACK_NS = 5_000
_PHASE = re.compile(r"\b(prefill|decode)\b|_(prefill|decode)\b|(prefill|decode)_", re.IGNORECASE)
_KV = re.compile(r"reshape_and_cache|kv_?cache|cache_ops|copy_blocks|swap_blocks|paged_attention|"
                 r"store_kv|write_to_kv|kv_copy", re.IGNORECASE)


def inference_facts(ctx: Context) -> dict[str, Any]:
    out: dict[str, Any] = {}
    replays = _replays(ctx)
    if replays:
        out["graph_replays"] = replays
    phases = _phases(ctx)
    if phases:
        out["phases"] = phases
    kv = _kv_cache(ctx)
    if kv:
        out["kv_cache"] = kv
    if out:
        out["lines"] = _lines(out)
    return out


def _replays(ctx: Context) -> dict[str, Any] | None:
    t = ctx.trace
    launches, starts, ends, calls = [], [], [], []
    for w in ctx.windows:
        dev = w.dev[ctx.launcher[w.dev] >= 0]
        graph = dev[ctx.is_graph_launch[ctx.launcher[dev]]]
        if not len(graph):
            continue
        call = ctx.launcher[graph]
        uniq, inv = np.unique(call, return_inverse=True)
        first = np.full(len(uniq), np.iinfo(np.int64).max)
        last = np.zeros(len(uniq), np.int64)
        np.minimum.at(first, inv, t.ts[graph])
        np.maximum.at(last, inv, t.end[graph])
        launches.append(uniq)
        starts.append(first)
        ends.append(last)
        calls.append(t.ts[uniq])
    if not launches:
        return None
    starts, ends, calls = (np.concatenate(x) for x in (starts, ends, calls))
    order = np.argsort(starts, kind="stable")
    starts, ends, calls = starts[order], ends[order], np.sort(calls)
    gaps = np.maximum(starts[1:] - ends[:-1], 0)
    between = np.diff(calls)
    back = gaps <= BACK_TO_BACK_NS
    return {
        "replays": int(len(starts)),
        "replay_median_us": us(np.median(ends - starts)),
        "back_to_back_share": round(float(back.mean()), 4) if len(gaps) else None,
        "median_gap_us": us(np.median(gaps[~back])) if (~back).any() else 0.0,
        "gap_total_us": us(gaps.sum()),
        "host_between_launches_median_us": us(np.median(between)) if len(between) else None,
    }


def _phases(ctx: Context) -> dict[str, Any] | None:
    """Time in ranges or operators named prefill or decode, on the host (merged)."""
    t = ctx.trace
    names = [i for i, s in enumerate(t.strings.strings) if _PHASE.search(s)]
    if not names:
        return None
    ev = np.flatnonzero(np.isin(t.name, names) & ~t.on_device & t.is_slice
                        & np.isin(t.kind, (Kind.ANNOTATION, Kind.HOST_OP)))
    lo, hi = min(w.start for w in ctx.windows), max(w.device_end for w in ctx.windows)
    ev = ev[(t.ts[ev] < hi) & (t.end[ev] > lo)]
    out: dict[str, Any] = {}
    for phase in ("prefill", "decode"):
        mine = ev[[phase in t.strings[t.name[e]].lower() for e in ev.tolist()]] if len(ev) else ev
        if len(mine):
            s, e = merge_intervals(t.ts[mine], t.end[mine])
            out[phase] = {"count": int(len(mine)), "time_us": us((e - s).sum())}
    return out or None


def _kv_cache(ctx: Context) -> dict[str, Any] | None:
    t = ctx.trace
    names = [i for i, s in enumerate(t.strings.strings) if _KV.search(s)]
    if not names:
        return None
    dev = np.concatenate([w.dev for w in ctx.windows]) if ctx.windows else np.zeros(0, np.int64)
    mine = dev[np.isin(t.name[dev], names)]
    if not len(mine):
        return None
    copies = mine[t.kind[mine] == Kind.MEMCPY]
    return {"count": int(len(mine)), "time_us": us(t.dur[mine].sum()), "copies": int(len(copies)),
            "names": sorted({t.strings[t.name[e]] for e in mine[:200].tolist()})[:5]}


def _lines(facts: dict[str, Any]) -> list[str]:
    out = []
    r = facts.get("graph_replays")
    if r:
        b2b = r["back_to_back_share"]
        text = f"Graph replays: {r['replays']:,} (median {duration(r['replay_median_us'] * 1000)} each)"
        if b2b is not None:
            text += f"; {share(b2b)} run back to back on the device"
            if b2b < 1:
                text += (f", the others after a median gap of {duration(r['median_gap_us'] * 1000)} "
                         f"({duration(r['gap_total_us'] * 1000)} of gaps in all)")
        if r["host_between_launches_median_us"] is not None:
            text += f"; the host schedules a replay every {duration(r['host_between_launches_median_us'] * 1000)}"
        out.append(text + ".")
    p = facts.get("phases")
    if p:
        out.append("Phases: " + ", ".join(f"{k} {v['count']:,} ranges, {duration(v['time_us'] * 1000)}"
                                          for k, v in p.items()) + ".")
    kv = facts.get("kv_cache")
    if kv:
        out.append(f"KV cache: {kv['count']:,} kernels or copies write or move cache blocks "
                   f"({duration(kv['time_us'] * 1000)} of device time: {', '.join(kv['names'][:3])}).")
    return out
