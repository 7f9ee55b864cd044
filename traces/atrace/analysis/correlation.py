"""Correlation of host work with accelerator work.

For each accelerator operator: the runtime call that launched it (same correlation id) and
the framework operator around that call; launch-to-start latency; the split of the trace's
time into device-bound, host-bound and idle stretches; and the idle gaps (bubbles) of each
accelerator core or stream.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..model.links import launch_pairs
from ..model.stats import covered, distribution, merge_intervals, us
from ..model.trace import DEVICE_KINDS, FLAG_SYNC, Kind, Trace


def host_operator_of(trace: Trace, events: np.ndarray) -> np.ndarray:
    """The innermost framework operator (HOST_OP) enclosing each event, -1 if none."""
    parent, _ = trace.nesting()
    cur = parent[events].copy()
    result = np.full(len(events), -1, np.int64)
    active = np.arange(len(events))
    while len(active):
        c = cur[active]
        valid = c >= 0
        found = valid & (trace.kind[np.maximum(c, 0)] == Kind.HOST_OP)
        result[active[found]] = c[found]
        active = active[valid & ~found]
        cur[active] = parent[cur[active]]
    return result


@dataclass
class Correlation:
    trace: Trace
    device_events: np.ndarray  # device events that have a launcher
    launcher: np.ndarray  # runtime call per device event
    host_op: np.ndarray  # framework operator per device event (-1 if none)
    latency_ns: np.ndarray  # device start - launch start
    unmatched_device: int  # device work (kernels, copies, sets, collectives) with no launcher
    states: dict[str, int]  # ns per state over the trace span
    intervals: list[tuple[int, int, str]]  # (start ns, end ns, state), merged runs
    bubbles: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self, top: int | None = 20, max_intervals: int = 2000) -> dict[str, Any]:
        s = self.trace.strings.strings
        pairs: dict[tuple[int, int], list] = {}
        ops = np.where(self.host_op >= 0, self.trace.op[np.maximum(self.host_op, 0)], -1)
        dev_ops = self.trace.op[self.device_events]
        key = ops.astype(np.int64) * (len(s) + 1) + dev_ops
        uniq, inv, counts = np.unique(key, return_inverse=True, return_counts=True)
        lat_sum = np.bincount(inv, weights=self.latency_ns, minlength=len(uniq))
        dur_sum = np.bincount(inv, weights=self.trace.dur[self.device_events], minlength=len(uniq))
        best = np.argsort(-dur_sum)[:top]
        for j in best.tolist():
            h, d = divmod(int(uniq[j]), len(s) + 1)
            pairs[(h, d)] = [int(counts[j]), float(dur_sum[j]), float(lat_sum[j])]
        total = sum(self.states.values()) or 1
        intervals = sorted(self.intervals, key=lambda x: x[1] - x[0], reverse=True)[:max_intervals]
        intervals.sort()
        return {
            "matched": len(self.device_events),
            "unmatched_device_events": self.unmatched_device,
            "launch_latency": distribution(self.latency_ns),
            "launch_latency_histogram": _histogram(self.latency_ns),
            "states": {
                k: {"time_us": us(v), "share": round(v / total, 4)} for k, v in self.states.items()
            },
            "intervals": [
                {"start_us": us(a), "end_us": us(b), "state": st} for a, b, st in intervals
            ],
            "launched_by": [
                {
                    "host_op": s[h] if h >= 0 else "(no host op)",
                    "device_op": s[d],
                    "count": c,
                    "device_time_us": us(dt),
                    "mean_launch_latency_us": us(lt / c),
                }
                for (h, d), (c, dt, lt) in pairs.items()
            ],
            "bubbles": self.bubbles,
        }


def _histogram(values: np.ndarray, bins: int = 20) -> dict[str, list[float]]:
    if not len(values):
        return {"edges_us": [], "counts": []}
    hi = max(float(np.percentile(values, 99)), 1.0)
    counts, edges = np.histogram(np.clip(values, 0, hi), bins=bins, range=(0, hi))
    return {"edges_us": [us(e) for e in edges], "counts": counts.tolist()}


def correlate(trace: Trace, *, top_bubbles: int = 10) -> Correlation:
    """Link device work to the host work that launched it; classify time; find bubbles."""
    launcher, dev = launch_pairs(trace)
    all_dev = trace.on_device & trace.is_slice & trace.kind_mask(*DEVICE_KINDS)
    host_op = host_operator_of(trace, launcher) if len(launcher) else np.zeros(0, np.int64)
    latency = trace.ts[dev] - trace.ts[launcher]
    states, intervals = _states(trace, all_dev)
    return Correlation(
        trace=trace,
        device_events=dev,
        launcher=launcher,
        host_op=host_op,
        latency_ns=latency,
        unmatched_device=int(all_dev.sum() - all_dev[dev].sum()),  # linked syncs are not device work
        states=states,
        intervals=intervals,
        bubbles=_bubbles(trace, all_dev, top_bubbles),
    )


def _states(trace: Trace, dev_mask: np.ndarray) -> tuple[dict[str, int], list]:
    """Split the span into device_bound / device_busy / host_bound / idle stretches.

    device_bound: the device runs while the host waits for it in a synchronisation call;
    device_busy: the device runs and the host is free to work ahead;
    host_bound: the device is idle while the host works (it waits on the host);
    idle: neither works.
    """
    if not len(trace):
        return {}, []
    parent, _ = trace.nesting()
    host = ~trace.on_device & trace.is_slice
    work = host & (trace.kind != Kind.ANNOTATION) & ((trace.flags & FLAG_SYNC) == 0)
    # Host work: top-level non-sync slices (nested ones are inside them).
    top = work & ((parent < 0) | (trace.kind[np.maximum(parent, 0)] == Kind.ANNOTATION))
    sync = host & ((trace.flags & FLAG_SYNC) != 0)
    d_s, d_e = merge_intervals(trace.ts[dev_mask], trace.end[dev_mask])
    h_s, h_e = merge_intervals(trace.ts[top], trace.end[top])
    y_s, y_e = merge_intervals(trace.ts[sync], trace.end[sync])
    t0, t1 = trace.span()
    cuts = np.unique(np.concatenate([[t0, t1], d_s, d_e, h_s, h_e, y_s, y_e]))
    cuts = cuts[(cuts >= t0) & (cuts <= t1)]
    if len(cuts) < 2:
        return {"idle": 0}, []
    a, b = cuts[:-1], cuts[1:]
    mid = a + (b - a) // 2
    dev_on = covered(d_s, d_e, mid)
    host_on = covered(h_s, h_e, mid)
    sync_on = covered(y_s, y_e, mid)
    state = np.where(
        dev_on, np.where(sync_on, 0, 1), np.where(host_on | sync_on, 2, 3)
    )
    names = ["device_bound", "device_busy", "host_bound", "idle"]
    lengths = b - a
    totals = np.bincount(state, weights=lengths, minlength=4)
    # Merge adjacent pieces with the same state.
    change = np.ones(len(state), bool)
    change[1:] = state[1:] != state[:-1]
    starts = a[change]
    run_state = state[change]
    ends = np.append(starts[1:], b[-1])
    intervals = [(int(s), int(e), names[k]) for s, e, k in zip(starts, ends, run_state)]
    return {names[k]: int(totals[k]) for k in range(4)}, intervals


def _bubbles(trace: Trace, dev_mask: np.ndarray, top: int) -> list[dict[str, Any]]:
    out = []
    for i, t in enumerate(trace.tracks):
        if not t.is_device:
            continue
        m = dev_mask & (trace.track == i)
        if not m.any():
            continue
        s, e = merge_intervals(trace.ts[m], trace.end[m])
        gaps = s[1:] - e[:-1]
        busy = int((e - s).sum())
        span = int(e[-1] - s[0])
        biggest = np.argsort(-gaps)[:top]
        out.append(
            {
                "track": i,
                "label": t.label,
                "busy_us": us(busy),
                "span_us": us(span),
                "utilization": round(busy / span, 4) if span else 0.0,
                "gaps": distribution(gaps),
                "idle_us": us(gaps.sum()),
                "largest_gaps": [
                    {"start_us": us(e[k]), "end_us": us(s[k + 1]), "gap_us": us(gaps[k])}
                    for k in biggest.tolist()
                ],
            }
        )
    return out
