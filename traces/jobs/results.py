"""A distributed job's cross-rank step, and its results for the pages and the API.

:func:`combine` (the task the last rank's analysis queued) reads every rank's digest from the
storage, matches the ranks' collectives and computes the cross-rank report
(``traces.atrace.analysis.job_report``), then asks the fleet why the straggler was slow: each
captured rank's device health during the capture window (traces/jobs/health.py). The report
and the collectives' timeline are stored in ``jobs/<id>/`` (JobFiles); the Job row gets the
straggler and the headline figures. Then each rank's trace gets its own analysis, as any
trace (its page), after the job's.

The readers answer from those files only.
"""

from __future__ import annotations

import io
import logging
import time
from typing import Any

import numpy as np
import orjson
from django.conf import settings
from django.core.files.storage import storages
from django.utils import timezone
from kombu.exceptions import OperationalError as BrokerUnavailable

from traces import queueing
from traces.atrace.analysis.advice import DEFAULT_ADVICE_LIMITS
from traces.atrace.analysis.advice.job import straggler_rule
from traces.atrace.analysis.job_digest import read_digest
from traces.atrace.analysis.job_report import job_report, timeline_arrays
from traces.atrace.analysis.paths.tables import step_list
from traces.choices import JobStatus, RankStatus, TraceSource, TraceStatus
from traces.jobs.analysis import enqueue_trace_analysis, fail_job, move_job
from traces.jobs.arrivals import is_open, ranks_due_at
from traces.jobs.health import device_health, health_reasons
from traces.models import Job, JobRank
from traces.store.files import REPORT, TIMELINE, JobFiles, reading_result

log = logging.getLogger(__name__)

MAX_COMBINE_ATTEMPTS = 3
TIMELINE_COLLECTIVES = 60  # collectives the job page draws at once


def combine(job_id: int) -> None:
    job = Job.objects.filter(pk=job_id).first()
    if job is None or job.status != JobStatus.COMBINING:
        return
    if job.attempts >= MAX_COMBINE_ATTEMPTS:
        fail_job(job_id, f"the cross-rank step did not finish in {MAX_COMBINE_ATTEMPTS} attempts", [JobStatus.COMBINING])
        return
    if not Job.objects.filter(pk=job_id, status=JobStatus.COMBINING).update(attempts=job.attempts + 1):
        return
    started = time.perf_counter()
    ranks = list(job.ranks.select_related("device__host", "trace"))
    ready = [r for r in ranks if r.status == RankStatus.READY and r.digest_file]
    if not ready:
        fail_job(job_id, "no rank could be analysed", [JobStatus.COMBINING])
        return
    storage = storages["traces"]
    digests = []
    for r in ready:
        with storage.open(r.digest_file, "rb") as f:
            digests.append(read_digest(f.read()))
    report, matched = job_report(digests)
    fleet = _fleet_facts(job, ranks)
    window = report["window_us"]
    found = straggler_rule(matched, DEFAULT_ADVICE_LIMITS, int((window[1] - window[0]) * 1000))
    straggler = found[0].rank if found else None
    finding = _finding(matched, found[0], fleet) if found else None
    report.update({
        "fleet": {str(k): v for k, v in fleet.items()},
        "straggler": finding,
        "missing_ranks": [{"rank": r.rank, "status": r.status, "error": r.error} for r in ranks if r not in ready],
    })
    files = JobFiles(job_id)
    files.save(REPORT, orjson.dumps(report, option=orjson.OPT_SERIALIZE_NUMPY))
    files.save(TIMELINE, _npz(timeline_arrays(matched)))
    device = finding and finding.get("device_id")
    summary = _summary(report, finding, ranks) | {"cross_rank_s": round(time.perf_counter() - started, 3)}
    log.info("job %s combined: %d ranks, %d collectives, straggler %s, in %.1f s", job_id, len(ready),
             report["collectives_matched"], straggler, summary["cross_rank_s"])
    move_job(
        job_id, [JobStatus.COMBINING], JobStatus.READY, ready_at=timezone.now(), progress=1.0,
        straggler_rank=straggler, straggler_device_id=device or None, summary=summary,
    )
    for r in ranks:
        if r.trace_id and r.trace and r.trace.status in (TraceStatus.QUEUED, TraceStatus.ANALYSING):
            enqueue_trace_analysis(r.trace_id)
    if _series_missing(fleet):
        schedule_health_refresh(job_id, 1)


def _series_missing(fleet: dict[int, dict[str, Any]]) -> bool:
    """Whether some rank's reasons were computed without its window's series."""
    return any((row.get("health") or {}).get("series_complete") is False for row in fleet.values())


def schedule_health_refresh(job_id: int, attempt: int) -> bool:
    """Queue ``refresh_health(job_id, attempt)`` JOB_HEALTH_RECHECK_S from now; False when
    the attempts are spent or the broker does not take it (the reasons stay as they are)."""
    if attempt > settings.JOB_HEALTH_RECHECKS:
        log.info("job %s: the store never held the capture window; the reasons stay from the snapshots", job_id)
        return False
    try:
        queueing.send(queueing.JOB_HEALTH_TASK, job_id, settings.TRACE_ANALYSIS_TIMEOUT_S, attempt,
                      countdown=settings.JOB_HEALTH_RECHECK_S)
    except BrokerUnavailable as exc:
        log.warning("job %s: the reasons' recheck not queued (%s)", job_id, exc)
        return False
    return True


def refresh_health(job_id: int, attempt: int) -> bool:
    """Compute a ready job's fleet facts and the straggler's reasons again (its report, its
    summary and its ranks' rows), once the store holds the capture window; queue another try
    while it still does not. Returns whether the series were there this time."""
    job = Job.objects.filter(pk=job_id, status=JobStatus.READY).first()
    if job is None:
        return False
    ranks = list(job.ranks.select_related("device__host", "trace"))
    fleet = _fleet_facts(job, ranks, wait_s=0.0)
    report = read_report(job)
    report["fleet"] = {str(k): v for k, v in fleet.items()}
    finding = report.get("straggler")
    summary = dict(job.summary or {})
    if finding:
        health = fleet.get(finding["rank"], {}).get("health") or {}
        finding["reasons"] = health.get("reasons", [])
        finding["fleet_checked"] = bool(health)
        if summary.get("straggler"):
            summary["straggler"] = {**summary["straggler"], "reasons": [r["text"] for r in finding["reasons"][:3]]}
    JobFiles(job_id).save(REPORT, orjson.dumps(report, option=orjson.OPT_SERIALIZE_NUMPY))
    Job.objects.filter(pk=job_id).update(summary=summary)
    missing = _series_missing(fleet)
    log.info("job %s: reasons computed again (try %d), series %s", job_id, attempt, "still missing" if missing else "complete")
    if missing:
        schedule_health_refresh(job_id, attempt + 1)
    return not missing


def _npz(arrays: dict[str, np.ndarray]) -> bytes:
    buf = io.BytesIO()
    np.savez_compressed(buf, **arrays)
    return buf.getvalue()


def _fleet_facts(job: Job, ranks: list[JobRank], wait_s: float | None = None) -> dict[int, dict[str, Any]]:
    """Per captured rank: where it ran and what the fleet saw of its device in the window."""
    out = {}
    versions = {r.rank: r.trace.sw_version if r.trace else "" for r in ranks}
    window = (job.capture_started_at, job.capture_ended_at)
    # One wait for the store over all the ranks, not one per rank.
    deadline = time.monotonic() + (settings.JOB_HEALTH_WAIT_S if wait_s is None else wait_s)
    for r in ranks:
        row = {"host": r.host_name, "device": r.device_serial, "device_id": r.device_id,
               "sw_version": versions[r.rank]}
        if job.source == TraceSource.CAPTURE and r.device is not None and all(window):
            facts = device_health(r.device, *window, at_capture=(r.health or {}).get("snapshots"),
                                  wait_s=max(0.0, deadline - time.monotonic()))
            peers = [v for k, v in versions.items() if k != r.rank]
            facts["reasons"] = health_reasons(facts, sw_version=versions[r.rank], peer_versions=peers)
            r.health = facts
            row["health"] = facts
        out[r.rank] = row
    JobRank.objects.bulk_update([r for r in ranks if r.rank in out and "health" in out[r.rank]], ["health"])
    return out


def _finding(matched, advice, fleet: dict[int, dict]) -> dict[str, Any]:
    """The advisor's straggler finding (rule 7), with where the rank ran and the fleet's
    reasons: the job time lost waiting for it is the advisor's saving (the others' waiting
    with nothing else to do), per step and in total."""
    found = advice.to_dict()
    measured = found["measured"]
    rank = advice.rank
    steps = len(step_list(matched.traces[matched.ranks.index(rank)]))
    facts = fleet.get(rank, {})
    health = facts.get("health") or {}
    return {
        "rank": rank, "title": found["title"], "action": found["action"], "severity": found["severity"],
        "last_at": measured["last_at"], "collectives": measured["collectives"], "steps": steps,
        "delay_total_us": found["saving_us"], "delay_per_step_us": found["saving_per_step_us"],
        "waiting_total_us": measured["waiting_total_us"],
        "waiting_per_step_us": round(measured["waiting_total_us"] / steps, 3) if steps else None,
        "host": facts.get("host", ""), "device": facts.get("device", ""), "device_id": facts.get("device_id"),
        "sw_version": facts.get("sw_version", ""),
        "reasons": health.get("reasons", []),
        "fleet_checked": bool(health),
    }


def _summary(report: dict, finding: dict | None, ranks: list[JobRank]) -> dict[str, Any]:
    count = {s: sum(1 for r in ranks if r.status == s) for s in (RankStatus.READY, RankStatus.FAILED, RankStatus.BUSY)}
    return {
        "collectives": report["collectives_matched"],
        "match_rule": report["match_rule"],
        "ranks_ready": count[RankStatus.READY], "ranks_failed": count[RankStatus.FAILED],
        "ranks_busy": count[RankStatus.BUSY],
        "skew_median_us": report["skew_summary"]["median_us"],
        "straggler": None if finding is None else {
            k: finding[k] for k in ("rank", "device", "host", "waiting_total_us", "delay_total_us",
                                    "delay_per_step_us", "last_at", "collectives")
        } | {"reasons": [r["text"] for r in finding["reasons"][:3]]},
    }


def prune_jobs(cutoff) -> int:
    """Delete jobs created before ``cutoff`` (their files go with them; their traces are
    pruned as traces are)."""
    pruned = 0
    for job in Job.objects.filter(created_at__lt=cutoff):
        job.delete()
        pruned += 1
    return pruned


# -- reading --------------------------------------------------------------------------------
def read_report(job: Job) -> dict[str, Any]:
    files = JobFiles(job.pk)
    with reading_result(files.owner, "cross-rank report"), files.open(REPORT) as f:
        return orjson.loads(f.read())


def timeline(job: Job, first: int = 0, count: int = TIMELINE_COLLECTIVES) -> dict[str, Any]:
    """Collectives ``first`` .. ``first + count`` on every rank: each rank's arrival (its wait
    for the last arrival) and the transfer after it, with the critical path's segments in that
    time; times in us from the job's start."""
    files = JobFiles(job.pk)
    with (reading_result(files.owner, "collective timeline"), files.open(TIMELINE) as f,
          np.load(io.BytesIO(f.read()), allow_pickle=False) as z):
        ranks, start, end, last = z["ranks"], z["start"], z["end"], z["last"]
    total = len(last)
    first = max(0, min(first, max(total - 1, 0)))
    sl = slice(first, first + count)
    s, e, lr = start[sl], end[sl], last[sl]
    origin = int(start[start >= 0].min()) if (start >= 0).any() else 0
    arrive = np.where(s >= 0, s, np.iinfo(np.int64).min).max(axis=1) if len(s) else np.zeros(0, np.int64)
    rows = []
    for k, r in enumerate(ranks.tolist()):
        mine = s[:, k] >= 0
        rows.append({
            "rank": r,
            "arrival_us": ((s[mine, k] - origin) / 1000).round(3).tolist(),
            "last_arrival_us": ((arrive[mine] - origin) / 1000).round(3).tolist(),
            "end_us": ((e[mine, k] - origin) / 1000).round(3).tolist(),
        })
    lo = (int(s[s >= 0].min()) - origin) / 1000 if (s >= 0).any() else 0.0
    hi = (int(e[e >= 0].max()) - origin) / 1000 if (e >= 0).any() else 0.0
    report = read_report(job)
    base = report["window_us"][0]
    path = [{**seg, "start_us": round(seg["start_us"] - origin / 1000, 3), "end_us": round(seg["end_us"] - origin / 1000, 3)}
            for seg in report["critical_path"]["segments"]]
    path = [seg for seg in path if seg["end_us"] >= lo and seg["start_us"] <= hi]
    return {"first": first, "count": len(lr), "total": total, "last_rank": lr.tolist(), "ranks": rows,
            "path": path, "window_us": [lo, hi], "job_start_us": round(origin / 1000 - base, 3)}


def job_page(job: Job) -> dict[str, Any]:
    """What the job page renders: the job, one row per rank (its row, its figures and its
    device's health once combined), the straggler finding and the collectives' skew."""
    ranks = list(job.ranks.select_related("device", "trace"))
    report = read_report(job) if job.status == JobStatus.READY else None
    figures = {row["rank"]: row for row in report["per_rank"]} if report else {}
    window = (report or {}).get("window_us") or [0, 0]
    span = max(window[1] - window[0], 1)
    rows = []
    for r in ranks:
        f = figures.get(r.rank)
        split = {k: round(100 * v / span, 1) for k, v in f["time_us"].items()} if f else None
        rows.append({"rank": r, "figures": f, "split": split, "health": r.health or {},
                     "reasons": [x["text"] for x in (r.health or {}).get("reasons", [])]})
    path = (report or {}).get("critical_path") or {}
    on_path = sorted(((int(k), v) for k, v in path.get("ranks_on_path", {}).items() if v), key=lambda kv: -kv[1])
    waiting = {"arrived": len(ranks), "due": ranks_due_at(job)} if is_open(job) else None
    return {"job": job, "rows": rows, "report": report, "finding": (report or {}).get("straggler"),
            "path": path, "on_path": on_path[:8], "skew": (report or {}).get("skew", [])[:12], "waiting": waiting}
