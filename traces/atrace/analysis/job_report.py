"""A distributed job's cross-rank step, from its ranks' digests (:mod:`.job_digest`).

The ranks' slim traces are matched as :func:`~.multirank.analyse_job` matches full ones
(the same collectives, rule and clock alignment), then:

* **per rank**: the figures of its digest, plus how long it waited inside collectives for
  the last arrival and how long the transfers took once everyone was there;
* **per collective**: the arrival skew -- who arrived last, how far behind the first
  (``skew_us``) and behind the next-latest (``margin_us``: what waiting for that one rank
  cost the collective);
* **stragglers**, as the multi-rank analysis ranks them;
* **the critical path at collective granularity**: walking back from the end of the job, a
  rank's path runs through its own work back to the last collective it finished; that
  collective finished when its last member arrived and the transfer was done, so the path
  continues on the last arrival, from its arrival back. The walk is linear in the number
  of collectives, so it scales to many ranks. It tells which ranks the job waited on, for
  how long, and how much of the job's time went to transfers with everyone present.

:func:`timeline_arrays` gives the arrivals and ends of every collective on every rank, for
drawing the ranks side by side.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import defaultdict
from typing import Any

import numpy as np

from ..model.stats import covered_before, merge_intervals, us
from ..model.trace import Kind
from .job_digest import RankDigest
from .multirank import Job, analyse_job, side_by_side_rows

__all__ = ["collective_path", "job_report", "timeline_arrays"]

MAX_PATH_SEGMENTS = 20_000


def job_report(digests: list[RankDigest], *, top: int = 20) -> tuple[dict[str, Any], Job]:
    """The job's cross-rank report, and the matched job (of slim traces) it came from."""
    digests = sorted(digests, key=lambda d: d.rank)
    for d in digests:
        d.slim.meta["rank"] = d.rank
    job = analyse_job([d.slim for d in digests])
    # Whole traces' spans: a slim trace lacks the host work before and after the device's.
    spans = {d.rank: (round(d.figures["start_us"] * 1000), round(d.figures["end_us"] * 1000)) for d in digests}
    waits = waiting_ns(job)
    late = job.lateness_ns()
    last_at: dict[int, int] = defaultdict(int)
    for c in job.collectives:
        last_at[c.last_rank] += 1
    per_rank = []
    for d in digests:
        row = {k: v for k, v in d.figures.items() if k != "device_ops"}
        row.update({"waiting_us": us(waits[d.rank][0]), "transfer_us": us(waits[d.rank][1]),
                    "last_at": last_at[d.rank], "lateness_us": us(late[d.rank])})
        per_rank.append(row)
    skew = skew_rows(job)
    skews = np.array([row["skew_us"] for row in skew]) if skew else np.zeros(1)
    report = {
        "ranks": job.ranks,
        "match_rule": job.rule,
        "collectives_matched": len(job.collectives),
        "window_us": _window(job, spans),
        "per_rank": per_rank,
        "side_by_side": side_by_side_rows(job.ranks, [d.figures["device_ops"] for d in digests], top),
        "skew": sorted(skew, key=lambda row: -row["skew_us"])[:top],
        "skew_summary": {"median_us": round(float(np.median(skews)), 3),
                         "p95_us": round(float(np.percentile(skews, 95)), 3), "max_us": round(float(skews.max()), 3)},
        "stragglers": job.stragglers(),
        "critical_path": collective_path(job, spans),
    }
    return report, job


def _spans(job: Job, spans: dict[int, tuple[int, int]] | None) -> dict[int, tuple[int, int]]:
    """Per rank: (start, end) on the job's clock."""
    out = {}
    for r, t, off in zip(job.ranks, job.traces, job.offsets_ns):
        a, b = spans[r] if spans and r in spans else t.span()
        if spans and r in spans or len(t):
            out[r] = (a + off, b + off)
    return out


def _window(job: Job, spans: dict[int, tuple[int, int]] | None) -> list[float]:
    aligned = _spans(job, spans)
    if not aligned:
        return [0.0, 0.0]
    return [us(min(a for a, _ in aligned.values())), us(max(b for _, b in aligned.values()))]


def waiting_ns(job: Job) -> dict[int, tuple[int, int]]:
    """Per rank: (time waiting in collectives for the last arrival, time transferring)."""
    out = {r: [0, 0] for r in job.ranks}
    for c in job.collectives:
        last = max(c.start_ns.values())
        for r, s in c.start_ns.items():
            wait = min(last, c.end_ns[r]) - s
            out[r][0] += wait
            out[r][1] += max(c.end_ns[r] - max(last, s), 0)
    return {r: (w, t) for r, (w, t) in out.items()}


def skew_rows(job: Job) -> list[dict[str, Any]]:
    """Per collective, in order: its skew, its last arrival and that one's margin."""
    rows = []
    for k, c in enumerate(job.collectives):
        starts = sorted(c.start_ns.values())
        first = starts[0]
        rows.append({
            "index": k, "collective": c.name, "key": list(c.key), "last_rank": c.last_rank,
            "skew_us": us(starts[-1] - first), "margin_us": us(starts[-1] - starts[-2]) if len(starts) > 1 else 0.0,
            "arrival_us": {str(r): us(s - first) for r, s in sorted(c.start_ns.items())},
        })
    return rows


def collective_path(job: Job, spans: dict[int, tuple[int, int]] | None = None) -> dict[str, Any]:
    """The job's critical path through its collectives' last arrivals (see the module's
    notes). ``spans``: each rank's (start, end) on its own clock, if its trace in the job
    is not whole."""
    aligned = _spans(job, spans)
    if not aligned:
        return {"length_us": 0.0, "segments": [], "ranks_on_path": {}, "transfer_us": 0.0, "hops": 0}
    pos = {r: k for k, r in enumerate(job.ranks)}
    begin = {r: a for r, (a, _) in aligned.items()}
    finish = {r: b for r, (_, b) in aligned.items()}
    member_of: dict[int, list[tuple[int, int]]] = defaultdict(list)  # rank -> (end, collective), by end
    for k, c in enumerate(job.collectives):
        for r, e in c.end_ns.items():
            member_of[r].append((e, k))
    ends = {r: [e for e, _ in sorted(v)] for r, v in member_of.items()}
    which = {r: [k for _, k in sorted(v)] for r, v in member_of.items()}
    left = {r: len(v) for r, v in ends.items()}  # each collective of a rank is visited once
    rank = max(finish, key=finish.get)
    t = finish[rank]
    segments: list[tuple[str, int, int, int, int]] = []  # (kind, rank, start, end, collective)
    while True:
        i = min(left.get(rank, 0), bisect_right(ends.get(rank, []), t)) - 1
        if i < 0:
            segments.append(("work", rank, begin[rank], t, -1))
            break
        left[rank] = i
        c = job.collectives[which[rank][i]]
        done = min(c.end_ns[rank], t)
        if done < t:
            segments.append(("work", rank, done, t, -1))
        last = c.last_rank
        arrival = min(c.start_ns[last], done)
        segments.append(("transfer", last, arrival, done, which[rank][i]))
        rank, t = last, arrival
    segments.reverse()
    return _path_summary(job, segments, pos)


def _path_summary(job: Job, segments, pos) -> dict[str, Any]:
    on_rank: dict[int, int] = defaultdict(int)
    work: dict[int, list[tuple[int, int]]] = defaultdict(list)
    transfer = 0
    for kind, r, a, b, _ in segments:
        if kind == "work":
            on_rank[r] += b - a
            work[r].append((a, b))
        else:
            transfer += b - a
    busy_share = {}
    for r, spans in work.items():
        trace, off = job.traces[pos[r]], job.offsets_ns[pos[r]]
        a, b = (np.array(x, np.int64) - off for x in zip(*spans))
        total = int((b - a).sum())
        if total:
            busy_share[str(r)] = round(device_busy_between(trace, a, b) / total, 4)
    hops = sum(1 for x, y in zip(segments, segments[1:]) if x[1] != y[1])
    length = segments[-1][3] - segments[0][2] if segments else 0
    return {
        "length_us": us(length),
        "transfer_us": us(transfer),
        "ranks_on_path": {str(r): us(on_rank.get(r, 0)) for r in job.ranks},
        "device_busy_share_on_path": busy_share,
        "hops": hops,
        "segments": [{"kind": kind, "rank": r, "start_us": us(a), "end_us": us(b),
                      **({"collective": k} if k >= 0 else {})} for kind, r, a, b, k in segments[:MAX_PATH_SEGMENTS]],
        "segments_total": len(segments),
    }


def device_busy_between(trace, a: np.ndarray, b: np.ndarray) -> int:
    """Time the rank's devices computed or copied within the windows [a, b) (summed)."""
    work = np.flatnonzero(trace.on_device & (trace.kind != Kind.COMM) & trace.is_slice)
    s, e = merge_intervals(trace.ts[work], trace.end[work])
    if not len(s):
        return 0
    return int((covered_before(s, e, b) - covered_before(s, e, a)).sum())


def timeline_arrays(job: Job) -> dict[str, np.ndarray]:
    """``start`` and ``end`` (ns, job clock; -1 where a rank is not a member): one row per
    collective, one column per rank; ``last``: the last arrival of each."""
    n, m = len(job.collectives), len(job.ranks)
    start = np.full((n, m), -1, np.int64)
    end = np.full((n, m), -1, np.int64)
    col = {r: k for k, r in enumerate(job.ranks)}
    for i, c in enumerate(job.collectives):
        for r, s in c.start_ns.items():
            start[i, col[r]] = s
            end[i, col[r]] = c.end_ns[r]
    last = np.array([c.last_rank for c in job.collectives], np.int64)
    return {"ranks": np.array(job.ranks, np.int64), "start": start, "end": end, "last": last}
