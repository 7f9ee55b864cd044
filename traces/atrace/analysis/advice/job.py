"""A distributed job's findings: every rank's, and rule 7, the straggler that makes the
others wait at collectives.

A rank is a straggler when it arrives last at ``straggler_last_share`` of the matched
collectives or more and costs the job at least ``straggler_min_cost_share`` of its time,
however its lateness (its arrival after the first rank's, summed) compares with the other
ranks' (a device that has just begun to throttle is late by little, but at every
collective, and every step pays for it). The waiting it causes at a collective
where it arrived last is the sum over the other ranks of how long each waited for it; the
saving is what the collectives would gain if it arrived with the next-latest rank: its
arrival minus the second-latest arrival, summed (an upper bound of the job time recovered,
since a collective cannot start before its last member).
"""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING

import numpy as np

from ...model.stats import covered_before, merge_intervals, us
from ...model.trace import Kind
from .context import step_spans
from .findings import BOUNDS, Evidence, Finding, Findings, severity, summary_line, verdict
from .limits import DEFAULT_ADVICE_LIMITS, AdviceLimits
from .run import advise
from .words import duration
from .words import share as share_word

if TYPE_CHECKING:
    from ..multirank import Collective, Job


def advise_job(job: Job, *, limits: AdviceLimits = DEFAULT_ADVICE_LIMITS) -> Findings:
    """The findings of a job: the straggler (if any), then each rule's largest per-rank
    finding, tagged with its rank (``measured["ranks"]`` lists every rank that has it)."""
    per_rank = {r: advise(t, limits=limits) for r, t in zip(job.ranks, job.traces)}
    by_rule: dict[str, list[Finding]] = defaultdict(list)
    for r, found in per_rank.items():
        for f in found.findings:
            f.rank = r
            by_rule[f.rule].append(f)
    merged = []
    for rows in by_rule.values():
        best = max(rows, key=lambda f: f.saving_ns)
        best.measured = {**best.measured, "ranks": sorted(f.rank for f in rows)}
        merged.append(best)
    elapsed = _elapsed(job)
    straggler = straggler_rule(job, limits, elapsed)
    if straggler is not None:
        merged = _without_waits(merged, straggler[1], limits)
        merged.append(straggler[0])
    merged.sort(key=lambda f: -f.saving_ns)
    shares = {k: float(np.mean([p.shares.get(k, 0.0) for p in per_rank.values()])) for k in BOUNDS}
    word = verdict(shares, limits)
    busy = [p.scope["device_busy_share"] for p in per_rank.values() if p.scope["device_busy_share"] is not None]
    lines = [f"Rank {r}: {p.account['lines'][0]}" for r, p in per_rank.items() if p.account.get("lines")]
    reason = merged[0].title if merged else (lines[0] if lines else "")
    return Findings(
        verdict=word,
        summary=summary_line(word, shares, merged, float(np.mean(busy)) if busy else None, reason),
        account={"lines": lines[:16], "per_rank": {str(r): p.account for r, p in list(per_rank.items())[:16]}},
        reason=reason,
        shares=shares,
        findings=merged,
        scope={"ranks": job.ranks, "match_rule": job.rule, "collectives_matched": len(job.collectives),
               "elapsed_us": us(elapsed),
               "per_rank": {str(r): {"verdict": p.verdict, "rules": p.rules} for r, p in per_rank.items()}},
    )


def _without_waits(findings: list[Finding], waits: dict[int, int], limits: AdviceLimits) -> list[Finding]:
    """A rank's exposed communication less its exposed waiting for the straggler (that is
    the straggler's finding); dropped when what is left is below the threshold."""
    out = []
    for f in findings:
        wait = waits.get(f.rank, 0) if f.rule == "exposed_communication" else 0
        if wait:
            path = f.saving_ns / f.saving_share if f.saving_share else 0
            f.saving_ns = max(f.saving_ns - wait, 0)
            f.saving_share = f.saving_ns / path if path else 0.0
            f.measured = {**f.measured, "waiting_for_straggler_us": us(wait)}
            if f.saving_share < limits.min_saving_share:
                continue
            f.severity = severity(f.saving_share, limits)
        out.append(f)
    return out


def _elapsed(job: Job) -> int:
    starts = [int(t.ts.min()) + off for t, off in zip(job.traces, job.offsets_ns) if len(t)]
    ends = [int(t.end.max()) + off for t, off in zip(job.traces, job.offsets_ns) if len(t)]
    return max(ends) - min(starts) if starts else 0


def straggler_rule(job: Job, limits: AdviceLimits, elapsed_ns: int) -> tuple[Finding, dict[int, int]] | None:
    """Rule 7 (see the module's notes). Also returns, per other rank, its exposed waiting
    for the straggler (ns), which its own exposed-communication finding should not count."""
    if not job.collectives or len(job.ranks) < 2:
        return None
    late = job.lateness_ns()
    last = defaultdict(int)
    for c in job.collectives:
        last[c.last_rank] += 1
    n = len(job.collectives)

    def others(r):  # the other ranks' median lateness (with two ranks: the other's)
        return float(np.median([v for k, v in late.items() if k != r]))

    candidates = [r for r in job.ranks if last[r] / n >= limits.straggler_last_share and late[r] > 0]
    if not candidates:
        return None
    rank = max(candidates, key=lambda r: late[r])
    pos = job.ranks.index(rank)
    trace, offset = job.traces[pos], job.offsets_ns[pos]
    steps = _step_windows(trace, offset)
    compute = {r: _compute(t, off) for r, t, off in zip(job.ranks, job.traces, job.offsets_ns)}
    per_step = defaultdict(int)
    rows = []
    hits: list[tuple[Collective, int, int]] = []  # (collective, its start on the straggler, the last other's)
    waits: list[int] = []  # per hit: the other ranks' waiting for the straggler, summed
    for c in job.collectives:
        starts = c.start_ns
        first = min(starts.values())
        rows.append({"collective": c.name, "key": list(c.key), "skew_us": us(c.skew_ns), "last_rank": c.last_rank,
                     "arrival_us": {str(r): us(s - first) for r, s in sorted(starts.items())}})
        if c.last_rank != rank or rank not in starts or len(starts) < 2:
            continue
        mine = starts[rank]
        hits.append((c, mine, max(s for r, s in starts.items() if r != rank)))
        waits.append(sum(mine - s for r, s in starts.items() if r != rank))
    waiting_total = sum(waits)
    for step, waiting in zip(_steps_of(steps, [mine for _, mine, _ in hits]), waits):
        per_step[step] += waiting
    gain, exposed_wait = _exposed_waits(hits, rank, compute)
    saving = int(gain.sum())
    worst = (hits[int(np.argmax(gain))][0].members[rank], int(gain.max())) if hits else None
    if saving <= 0:
        return None
    share = saving / max(elapsed_ns, 1)
    if share < limits.straggler_min_cost_share:
        return None
    events = [c.members[rank] for c in job.collectives if c.last_rank == rank][: limits.evidence_events]
    focus = None
    if worst is not None:
        e = worst[0]
        pad = max(int(trace.dur[e]) // 2, worst[1], 1000)
        focus = (int(trace.ts[e]) - pad, int(trace.end[e]) + pad)
    measured = {
        "straggler_rank": rank,
        "last_at": last[rank],
        "collectives": n,
        "last_share": round(last[rank] / n, 4),
        "lateness_us": {str(r): us(v) for r, v in sorted(late.items())},
        "lateness_over_others_median": round(late[rank] / others(rank), 2) if others(rank) > 0 else None,
        "cost_share_of_job": round(share, 4),
        "waiting_total_us": us(waiting_total),
        "waiting_per_step_us": {k: us(v) for k, v in per_step.items()},
        "exposed_waiting_us": {str(r): us(v) for r, v in sorted(exposed_wait.items())},
        "per_collective": rows[:1000],
    }
    steps_n = len(steps)
    cost = (f"{duration(saving)} over {steps_n} steps, {duration(saving / steps_n)} per step" if steps_n
            else duration(saving))
    title = (f"Straggler: rank {rank} arrives last at {last[rank]} of {n} collectives and costs the job "
             f"{share_word(share)} of its time ({cost}); the other ranks wait {duration(waiting_total)} for it in "
             f"total, {duration(saving)} of it with nothing else to do")
    action = (f"Find what rank {rank} does before its collectives that the others do not (its own findings: input, "
              "host work, copies), balance the work and input across ranks, and check its node (clocks throttled, "
              "a degraded link, a noisy neighbour).")
    finding = Finding(
        rule="straggler", severity=severity(share, limits), title=title, saving_ns=int(saving), saving_share=share,
        saving_per_step_ns=int(saving / max(len(steps), 1)) if steps else None, measured=measured,
        evidence=Evidence(events=events, steps=sorted(k for k in per_step if k), operators=[
            {"op": r["collective"], "side": "device", "count": 1, "time_us": r["skew_us"]}
            for r in sorted(rows, key=lambda r: -r["skew_us"])[:5]],
            windows_ns=[(int(trace.ts[e]), int(trace.end[e])) for e in events[:20]], focus_ns=focus),
        action=action, rank=rank,
    )
    return finding, dict(exposed_wait)


def _compute(trace, offset: int) -> tuple[np.ndarray, np.ndarray]:
    """A rank's computation on its devices, merged, on the job's clock."""
    k = np.flatnonzero(trace.on_device & (trace.kind == Kind.KERNEL) & trace.is_slice)
    return merge_intervals(trace.ts[k] + offset, trace.end[k] + offset)


def _exposed_waits(hits: list[tuple[Collective, int, int]], rank: int,
                   compute: dict[int, tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, dict[int, int]]:
    """For the collectives the straggler arrives at last: what waiting for it cost the job
    (per collective: the most any other rank waited with no computation of its own to
    overlap), and each other rank's exposed waiting in all (ns)."""
    gain = np.full(len(hits), np.iinfo(np.int64).min, np.int64)
    members: dict[int, list[int]] = defaultdict(list)
    for h, (c, _, _) in enumerate(hits):
        for r in c.start_ns:
            if r != rank:
                members[r].append(h)
    mine = np.array([m for _, m, _ in hits], np.int64)
    second = np.array([s for _, _, s in hits], np.int64)
    exposed_wait: dict[int, int] = {}
    for r, hs in members.items():
        hs = np.array(hs, np.int64)
        a, b = second[hs], mine[hs]
        exposed = (b - a) - _covered(compute[r], a, b)
        exposed_wait[r] = int(exposed.sum())
        gain[hs] = np.maximum(gain[hs], exposed)
    return gain, exposed_wait


def _covered(intervals: tuple[np.ndarray, np.ndarray], a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """How much of each window [a, b) the sorted, disjoint intervals cover (ns)."""
    s, e = intervals
    return np.maximum(covered_before(s, e, b) - covered_before(s, e, a), 0)


def _step_windows(trace, offset: int) -> list[tuple[str, int, int]]:
    names, spans = step_spans(trace)
    return [(n, int(a) + offset, int(b) + offset) for n, (a, b) in zip(names, spans.tolist())]


def _steps_of(steps: list[tuple[str, int, int]], times: list[int]) -> list[str]:
    """The first step (in time order) that each time falls in; "" for none."""
    starts = np.array([a for _, a, _ in steps], np.int64)
    ends = np.array([b for _, _, b in steps], np.int64)
    if not len(steps) or (np.diff(ends) < 0).any():  # nested steps: the first that holds it
        return [next((n for n, a, b in steps if a <= t < b), "") for t in times]
    t = np.array(times, np.int64)
    # Starts and ends both in order: the first step ending after t holds it if it began by t.
    first = np.searchsorted(ends, t, side="right")
    inside = first < np.searchsorted(starts, t, side="right")
    return [steps[j][0] if ok else "" for j, ok in zip(first.tolist(), inside.tolist())]
