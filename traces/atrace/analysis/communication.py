"""Communication: how device time splits into computation, communication and memory, how
much communication hides behind computation, and what each collective moved.

Shares are of the summed device-work time (what Holistic Trace Analysis reports as its
kernel type breakdown). Overlap is HTA's communication/computation overlap: the time when
a communication kernel and a computation kernel both run (on the same device), over the
time communication runs (unions of intervals, so concurrent streams count once).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np

from ..model.kinds import COMMUNICATION, COMPUTATION, WORK_CLASSES, collectives, work_classes
from ..model.stats import merge_intervals, us
from ..model.trace import Trace


def _intersection(a_s, a_e, b_s, b_e) -> int:
    """Total length of the intersection of two sorted disjoint interval sets."""
    if not len(a_s) or not len(b_s):
        return 0
    cuts = np.unique(np.concatenate([a_s, a_e, b_s, b_e]))
    lo, hi = cuts[:-1], cuts[1:]
    mid = lo + (hi - lo) / 2
    in_a = np.searchsorted(a_s, mid, "right") - 1
    in_b = np.searchsorted(b_s, mid, "right") - 1
    ok_a = (in_a >= 0) & (mid < a_e[np.maximum(in_a, 0)])
    ok_b = (in_b >= 0) & (mid < b_e[np.maximum(in_b, 0)])
    return int((hi - lo)[ok_a & ok_b].sum())


def _device_of(trace: Trace, events: np.ndarray) -> np.ndarray:
    """A device number per event: the track's device, else one per process."""
    seen: dict = {}
    devices = np.array([seen.setdefault(t.device if t.device >= 0 else ("pid", t.pid), len(seen))
                        for t in trace.tracks], np.int64)
    return devices[trace.track[events]] if len(trace.tracks) else np.zeros(len(events), np.int64)


def overlap(trace: Trace, window: tuple[int, int] | None = None) -> dict[str, int]:
    """Communication time, and the part of it during which computation also ran (ns)."""
    classes = work_classes(trace)
    mask = np.ones(len(trace), bool)
    if window is not None:
        mask = (trace.ts >= window[0]) & (trace.ts < window[1])
    comm_i = np.flatnonzero(mask & (classes == WORK_CLASSES.index(COMMUNICATION)))
    comp_i = np.flatnonzero(mask & (classes == WORK_CLASSES.index(COMPUTATION)))
    comm_ns = hidden = 0
    dev_comm, dev_comp = _device_of(trace, comm_i), _device_of(trace, comp_i)
    for d in np.unique(dev_comm).tolist():
        c = comm_i[dev_comm == d]
        k = comp_i[dev_comp == d]
        c_s, c_e = merge_intervals(trace.ts[c], trace.end[c])
        k_s, k_e = merge_intervals(trace.ts[k], trace.end[k])
        comm_ns += int((c_e - c_s).sum())
        hidden += _intersection(c_s, c_e, k_s, k_e)
    return {"communication_ns": comm_ns, "overlapped_ns": hidden}


def communication(trace: Trace, *, window: tuple[int, int] | None = None) -> dict[str, Any]:
    """The computation / communication / memory split, overlap and per-collective table."""
    classes = work_classes(trace)
    mask = classes >= 0
    if window is not None:
        mask &= (trace.ts >= window[0]) & (trace.ts < window[1])
    idx = np.flatnonzero(mask)
    total = np.bincount(classes[idx], weights=trace.dur[idx], minlength=len(WORK_CLASSES))
    count = np.bincount(classes[idx], minlength=len(WORK_CLASSES))
    all_ns = float(total.sum())
    ov = overlap(trace, window)
    return {
        "device_work_us": us(all_ns),
        "split": {
            cls: {
                "count": int(count[k]),
                "time_us": us(total[k]),
                "share": round(float(total[k]) / all_ns, 6) if all_ns else 0.0,
            }
            for k, cls in enumerate(WORK_CLASSES)
        },
        "overlap": {
            "communication_us": us(ov["communication_ns"]),
            "overlapped_us": us(ov["overlapped_ns"]),
            "share": round(ov["overlapped_ns"] / ov["communication_ns"], 6) if ov["communication_ns"] else None,
        },
        "collectives": collectives_table(trace, idx[classes[idx] == WORK_CLASSES.index(COMMUNICATION)]),
    }


def collectives_table(trace: Trace, events: np.ndarray) -> list[dict[str, Any]]:
    """Per collective type: count, time, bytes moved and algorithm bandwidth."""
    rows: dict[str, dict[str, Any]] = defaultdict(lambda: {"count": 0, "time_ns": 0, "bytes": 0, "sized": 0})
    strings = trace.strings.strings
    ids = events.tolist()
    for e, info in zip(ids, collectives(trace, ids)):
        info = info or {"collective": strings[trace.name[e]]}
        row = rows[info["collective"]]
        row["count"] += 1
        row["time_ns"] += int(trace.dur[e])
        if info.get("bytes") is not None:
            row["bytes"] += info["bytes"]
            row["sized"] += 1
    out = []
    for name, row in sorted(rows.items(), key=lambda kv: -kv[1]["time_ns"]):
        out.append({
            "collective": name,
            "count": row["count"],
            "time_us": us(row["time_ns"]),
            "bytes": row["bytes"] if row["sized"] else None,
            "algbw_gb_s": round(row["bytes"] / row["time_ns"], 3) if row["sized"] and row["time_ns"] else None,
        })
    return out
