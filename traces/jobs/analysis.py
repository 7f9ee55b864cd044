"""A distributed job's analysis: fanned out per rank, joined in one cross-rank step.

Once a job's ranks are stored (captured or uploaded), :func:`start_analysis` queues one
:func:`analyse_rank` task per rank at once on the traces queue (a Celery group), so every
trace worker, on any machine, takes ranks. Each reads its rank's trace from the storage,
digests it (``traces.atrace.analysis.job_digest``: the rank's figures and a slim trace) and
stores the digest beside the trace. The join is a claim, not a counter: a rank task that
finds no rank still pending moves the job from analysing to combining with a conditional
update, and only the task whose update won queues the cross-rank step
(traces/jobs/results.py). A redelivered task or two ranks finishing together cannot start it
twice, and no result backend is needed (Celery's chord would need one, and counts a
redelivered task twice).

Every state has a way out (:func:`expire_stuck_jobs`, run by beat): a job queued, capturing
or combining too long fails with the reason; ranks analysing too long fail and the job goes
on with the ranks it has.
"""

from __future__ import annotations

import logging
from datetime import timedelta

import redis
from django.conf import settings
from django.utils import timezone
from kombu.exceptions import OperationalError as BrokerUnavailable

from fleet.durations import human_duration
from traces import atrace, events, queueing, writers
from traces.atrace.analysis.job_digest import digest_bytes, rank_digest
from traces.choices import JOB_ACTIVE_STATUSES, RANK_PENDING_STATUSES, JobStatus, RankStatus
from traces.models import Job, JobRank
from traces.store.files import DIGEST, TraceFiles

log = logging.getLogger(__name__)

#: Extra seconds a job capture may take beyond its window (storing every rank's trace).
JOB_CAPTURE_GRACE_S = 120


# -- state changes ---------------------------------------------------------------------------
def move_job(job_id: int, from_statuses, to: str, **fields) -> bool:
    """Move a job from one of ``from_statuses`` to ``to``; False if another got there first."""
    changed = Job.objects.filter(pk=job_id, status__in=list(from_statuses)).update(
        status=to, status_changed_at=timezone.now(), **fields
    )
    if changed:
        job = Job.objects.get(pk=job_id)
        _tell_pages(events.job_changed, job_id, to, job.progress, job.error, url=job.get_absolute_url())
    return bool(changed)


def _tell_pages(send, *args, **kwargs) -> None:
    """A push to the job's pages; a channel layer that is down costs the live update only."""
    try:
        send(*args, **kwargs)
    except (OSError, redis.RedisError) as exc:
        log.warning("job %s: live update not sent (%s)", args[0], exc)


def push_ranks(job_id: int, progress: float, rows: list[dict]) -> None:
    _tell_pages(events.job_ranks, job_id, progress, rows)


def fail_job(job_id: int, reason: str, from_statuses=None) -> bool:
    """Fail the job; ranks that never got their trace stored fail with it (a rank already
    stored keeps its trace, which is analysed as any trace)."""
    log.warning("job %s failed: %s", job_id, reason)
    moved = move_job(job_id, from_statuses or JOB_ACTIVE_STATUSES, JobStatus.FAILED, error=reason[:2000])
    if moved:
        for r in JobRank.objects.filter(job_id=job_id, status__in=[RankStatus.QUEUED, RankStatus.CAPTURING]):
            _fail_rank(r, f"the job failed: {reason}")
        for r in JobRank.objects.filter(job_id=job_id, status=RankStatus.ANALYSING, trace__isnull=False):
            enqueue_trace_analysis(r.trace_id)
    return moved


def _fail_rank(r: JobRank, reason: str) -> None:
    JobRank.objects.filter(pk=r.pk).update(status=RankStatus.FAILED, error=reason[:2000])
    if r.trace_id:
        writers.fail(r.trace_id, reason)
    push_ranks(r.job_id, 1.0, [{"rank": r.rank, "status": RankStatus.FAILED, "progress": 1.0, "events": None,
                                "error": reason}])


# -- queueing --------------------------------------------------------------------------------
def enqueue(job_id: int, task_name: str, limit_s: float, *more: int) -> None:
    """Queue a job's task; if the broker cannot take it, the job fails saying so."""
    try:
        queueing.send(task_name, job_id, limit_s, *more)
    except BrokerUnavailable as exc:
        fail_job(job_id, f"could not be queued: the task broker is not answering ({exc})")
        raise


def enqueue_trace_analysis(trace_id: int) -> None:
    try:
        queueing.send(queueing.ANALYSIS_TASK, trace_id, settings.TRACE_ANALYSIS_TIMEOUT_S)
    except BrokerUnavailable as exc:
        writers.fail(trace_id, f"could not be queued: the task broker is not answering ({exc})")


def start_analysis(job_id: int, from_statuses, **fields) -> None:
    """Fan the per-rank analyses out (every rank whose trace is stored), or fail the job when
    no rank has a trace."""
    ranks = list(JobRank.objects.filter(job_id=job_id, status=RankStatus.ANALYSING).values_list("rank", flat=True))
    if not ranks:
        why = list(JobRank.objects.filter(job_id=job_id).exclude(error="").values_list("error", flat=True)[:3])
        fail_job(job_id, "no rank was traced" + (": " + "; ".join(why) if why else ""), from_statuses)
        return
    if not move_job(job_id, from_statuses, JobStatus.ANALYSING, analysis_started_at=timezone.now(), progress=0.0,
                    **fields):
        return
    try:
        queueing.send_group(queueing.JOB_RANK_TASK, [(job_id, r) for r in ranks], settings.TRACE_ANALYSIS_TIMEOUT_S)
    except BrokerUnavailable as exc:
        fail_job(job_id, f"could not be queued: the task broker is not answering ({exc})")
        raise


# -- one rank --------------------------------------------------------------------------------
def analyse_rank(job_id: int, rank: int) -> None:
    """Digest one rank's trace and store the digest; the last rank in starts the join."""
    r = JobRank.objects.select_related("trace", "job").filter(job_id=job_id, rank=rank).first()
    if r is None or r.status != RankStatus.ANALYSING or r.job.status != JobStatus.ANALYSING:
        return  # gone, done already (a redelivery), or the job was failed meanwhile
    if r.trace is None:
        _fail_rank(r, "its trace was deleted")
    else:
        _digest(r)
    done = JobRank.objects.filter(job_id=job_id).exclude(status__in=RANK_PENDING_STATUSES).count()
    Job.objects.filter(pk=job_id, status=JobStatus.ANALYSING).update(progress=done / max(r.job.world_size, 1))
    maybe_combine(job_id)


def _digest(r: JobRank) -> None:
    files = TraceFiles(r.trace_id)
    stored_as = ""
    try:
        with files.storage.open(r.trace.raw_file, "rb") as f:
            stored_as = f.name
            parsed = writers.read_bounded(f)
        parsed.meta["file"] = r.trace.params.get("file", r.trace.name)
        data = digest_bytes(rank_digest(parsed, r.rank))
    except atrace.TraceError as exc:
        reason = str(exc).replace(stored_as, r.trace.name) if stored_as else str(exc)
        _fail_rank(r, f"the trace cannot be analysed: {reason}")
        return
    files.save(DIGEST, data)
    moved = JobRank.objects.filter(pk=r.pk, status=RankStatus.ANALYSING).update(
        status=RankStatus.READY, digest_file=files.name(DIGEST), events=len(parsed), progress=1.0
    )
    if moved:
        log.info("job %s rank %s digested: %d events", r.job_id, r.rank, len(parsed))
        push_ranks(r.job_id, 1.0, [{"rank": r.rank, "status": RankStatus.READY, "progress": 1.0,
                                    "events": len(parsed), "error": ""}])


def maybe_combine(job_id: int) -> bool:
    """Claim the cross-rank step when no rank is pending; True for the one caller that won."""
    if JobRank.objects.filter(job_id=job_id, status__in=RANK_PENDING_STATUSES).exists():
        return False
    if JobRank.objects.filter(job_id=job_id).count() < Job.objects.get(pk=job_id).world_size:
        return False  # ranks still to arrive (traces/jobs/arrivals.py)
    if not move_job(job_id, [JobStatus.ANALYSING], JobStatus.COMBINING, progress=0.0):
        return False
    enqueue(job_id, queueing.JOB_COMBINE_TASK, settings.TRACE_ANALYSIS_TIMEOUT_S)
    return True


# -- timeouts --------------------------------------------------------------------------------
def expire_stuck_jobs(now=None) -> int:
    """Fail every job (or pending rank) that has stayed in a state longer than it allows."""
    now = now or timezone.now()
    expired = 0
    queued = now - timedelta(seconds=settings.TRACE_QUEUE_TIMEOUT_S)
    for job_id in _not_open(Job.objects.filter(status=JobStatus.QUEUED, status_changed_at__lt=queued)):
        expired += fail_job(job_id, f"no trace worker took it within {settings.TRACE_QUEUE_TIMEOUT_S} s", [JobStatus.QUEUED])
    for job in Job.objects.filter(status=JobStatus.CAPTURING):
        limit = job.params.get("duration_s", writers.MAX_CAPTURE_S) + JOB_CAPTURE_GRACE_S
        if job.status_changed_at < now - timedelta(seconds=limit):
            expired += fail_job(job.pk, f"the capture did not finish within {human_duration(limit)}", [JobStatus.CAPTURING])
    limit = now - timedelta(seconds=settings.TRACE_ANALYSIS_TIMEOUT_S)
    for job_id in _not_open(Job.objects.filter(status=JobStatus.ANALYSING, status_changed_at__lt=limit)):
        for r in JobRank.objects.filter(job_id=job_id, status__in=RANK_PENDING_STATUSES):
            _fail_rank(r, f"not analysed within {settings.TRACE_ANALYSIS_TIMEOUT_S} s")
            expired += 1
        maybe_combine(job_id)
    for job_id in Job.objects.filter(status=JobStatus.COMBINING, status_changed_at__lt=limit).values_list("pk", flat=True):
        expired += fail_job(job_id, f"the cross-rank step did not finish within {settings.TRACE_ANALYSIS_TIMEOUT_S} s",
                            [JobStatus.COMBINING])
    return expired


def _not_open(jobs) -> list[int]:
    """The ids of ``jobs`` but those still waiting for ranks until their own deadline
    (traces/jobs/arrivals.py closes those)."""
    return [pk for pk, params in jobs.values_list("pk", "params") if not (params or {}).get("open")]
