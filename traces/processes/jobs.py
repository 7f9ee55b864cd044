"""Capturing a real distributed PyTorch job: every rank of one run (torchrun's run id, or a
Slurm job id), on whatever hosts' agents its processes poll, started together.

:func:`request_process_job` writes the Job row, one JobRank per rank of the job's world and
a Trace per rank that polls a live agent, then sends each rank's capture to its host's agent
queue (traces/processes/capture.py) when the rows commit. A capture by duration starts on every
rank at one wall-clock instant (libkineto's PROFILE_START_TIME, far enough ahead for every
process to poll first); a capture by iterations starts on the next multiple of
JOB_ITERATION_ROUNDUP iterations, the same step for ranks that step together. A rank that
no agent hears, or that is already being captured, is failed or marked busy in words, and
the others go on.

Each agent reports its rank here (:func:`rank_started`, :func:`rank_stored`,
:func:`rank_failed`); the agent whose rank is the last one settled moves the job on to the
per-rank analyses and the cross-rank step (traces/jobs/analysis.py), exactly as for a job
captured on emulated devices.
"""

from __future__ import annotations

import time

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from fleet.agent.queues import agent_is_alive, process_fresh_since
from fleet.models import HostProcess
from traces import queueing, writers
from traces.choices import JobStatus, RankStatus, TraceSource
from traces.jobs.analysis import move_job, push_ranks, start_analysis
from traces.jobs.health import snapshot_facts
from traces.models import Job, JobRank, Trace
from traces.processes.requests import busy_capture, device_of, rank_params
from traces.refusals import BadTrace, CaptureUnavailable

#: Seconds between the request and a job's common start: libkineto polls every 5 s, and each
#: agent must have taken its rank's task before that.
JOB_START_LEAD_S = 8.0
MAX_RUN_ID = 128


def run_processes(run_id: str) -> list[HostProcess]:
    """The ranks of run ``run_id`` polling a live agent now, one per rank (the latest seen)."""
    found: dict[int, HostProcess] = {}
    query = (HostProcess.objects.select_related("host").filter(role="rank", last_poll__gte=process_fresh_since())
             .order_by("first_seen"))
    for process in query:
        if process.run_id == run_id and process.rank is not None and agent_is_alive(process.host):
            found[process.rank] = process
    return [found[r] for r in sorted(found)]


def validate_run_id(raw) -> str:
    if not isinstance(raw, str) or not raw.strip() or len(raw) > MAX_RUN_ID:
        raise BadTrace(f"run_id must be a job's run id (TORCHELASTIC_RUN_ID or SLURM_JOB_ID, at most {MAX_RUN_ID} "
                       f"characters), not {raw!r}")
    return raw.strip()


def request_process_job(user, run_id, duration_s, iterations=None, name: str = "") -> Job:
    """Write the job's rows (queued) and send each rank's capture to its agent on commit."""
    run_id = validate_run_id(run_id)
    if iterations is not None:
        iterations = writers.validate_iteration_count(iterations)
        duration_s = writers.MAX_CAPTURE_S
    duration = writers.validate_duration(duration_s)
    processes = run_processes(run_id)
    if not processes:
        raise CaptureUnavailable(f"no rank of job {run_id!r} polls a running agent: start its processes with "
                                 f"KINETO_USE_DAEMON=1 on hosts whose agent serves Kineto")
    world = max([p.world_size or 0 for p in processes] + [processes[-1].rank + 1])
    writers.make_room(0)
    timing = ({"iterations": iterations, "iteration_roundup": settings.JOB_ITERATION_ROUNDUP} if iterations else
              {"start_time_ms": int((time.time() + JOB_START_LEAD_S) * 1000)})
    name = (name or "").strip()[:200] or f"{run_id} {timezone.now():%Y-%m-%d %H:%M:%S}"
    by_rank = {p.rank: p for p in processes}
    sends = []
    with transaction.atomic():
        job = Job.objects.create(
            name=name, source=TraceSource.CAPTURE, created_by=user, parallelism="data", world_size=world,
            device_type="cpu", workload="pytorch",
            params={"duration_s": duration, "run_id": run_id, "processes": True, **timing},
        )
        for rank in range(world):
            process = by_rank.get(rank)
            if process is None:
                JobRank.objects.create(job=job, rank=rank, status=RankStatus.FAILED,
                                       error=f"rank {rank} of job {run_id} polls no running agent: not captured")
                continue
            if busy := busy_capture(process.host.name, process.pid):
                JobRank.objects.create(job=job, rank=rank, status=RankStatus.BUSY, host_name=process.host.name,
                                       error=f"process {process.pid} is being captured already (trace {busy.pk}); "
                                             f"its rank runs untraced")
                continue
            device = device_of(process)  # a GPU rank: its device, whose health the job's findings read
            try:
                with transaction.atomic():
                    trace = Trace.objects.create(
                        name=f"{name} · rank {rank}", source=TraceSource.CAPTURE, created_by=user, device=device,
                        host_name=process.host.name, device_type=device.device_type if device else "cpu",
                        workload="pytorch",
                        params={"duration_s": duration, "pid": process.pid, "command": process.command[:200],
                                "job": job.pk, **rank_params(process), **timing},
                    )
            except IntegrityError:  # its device is capturing another trace
                JobRank.objects.create(job=job, rank=rank, status=RankStatus.BUSY, host_name=process.host.name,
                                       device=device, device_serial=device.serial,
                                       error=f"device {device.serial} is capturing another trace; its rank runs untraced")
                continue
            JobRank.objects.create(job=job, rank=rank, status=RankStatus.QUEUED, host_name=process.host.name,
                                   device=device, device_serial=device.serial if device else f"pid {process.pid}",
                                   trace=trace)
            sends.append((process.host.agent_queue, trace.pk))
        if not sends:
            raise CaptureUnavailable(f"every rank of job {run_id} is being captured already")
    transaction.on_commit(lambda: [writers._enqueue_to(queue, queueing.PROCESS_CAPTURE_TASK, pk) for queue, pk in sends])
    return job


# -- what the agents report ------------------------------------------------------------------
def _rank(trace: Trace) -> JobRank | None:
    return JobRank.objects.select_related("job").filter(job_id=trace.params["job"], trace_id=trace.pk).first()


def rank_started(trace: Trace) -> bool:
    """The rank's capture begins (the job's capture with its first rank); False: the job
    failed or went on meanwhile, and this rank is not captured."""
    r = _rank(trace)
    if r is None or r.job.status not in (JobStatus.QUEUED, JobStatus.CAPTURING):
        writers.fail(trace.pk, "its job is no longer capturing")
        return False
    move_job(r.job_id, [JobStatus.QUEUED], JobStatus.CAPTURING, capture_started_at=timezone.now())
    health = {"snapshots": {"start": snapshot_facts(r.device_id)}} if r.device_id else r.health
    JobRank.objects.filter(pk=r.pk, status=RankStatus.QUEUED).update(status=RankStatus.CAPTURING, health=health)
    push_ranks(r.job_id, 0.0, [{"rank": r.rank, "status": RankStatus.CAPTURING, "progress": 0.0, "events": None,
                                "error": ""}])
    return True


def rank_progress(trace: Trace, fraction: float, words: str) -> None:
    push_ranks(trace.params["job"], fraction, [{"rank": trace.params.get("rank"), "status": RankStatus.CAPTURING,
                                               "progress": fraction, "events": None, "error": "", "stage": words}])


def rank_stored(trace: Trace) -> None:
    """The rank's trace is stored: it waits for its job's analyses."""
    r = _rank(trace)
    if r is None:
        return
    JobRank.objects.filter(pk=r.pk, status=RankStatus.CAPTURING).update(status=RankStatus.ANALYSING, progress=1.0)
    push_ranks(r.job_id, 1.0, [{"rank": r.rank, "status": RankStatus.ANALYSING, "progress": 1.0, "events": None,
                                "error": ""}])
    _settled(r.job_id)


def rank_failed(trace: Trace, reason: str) -> None:
    """The rank's capture failed (the trace with it): the other ranks go on."""
    writers.fail(trace.pk, reason)
    r = _rank(trace)
    if r is None:
        return
    JobRank.objects.filter(pk=r.pk).exclude(status=RankStatus.FAILED).update(status=RankStatus.FAILED,
                                                                             error=reason[:2000])
    push_ranks(r.job_id, 1.0, [{"rank": r.rank, "status": RankStatus.FAILED, "progress": 1.0, "events": None,
                                "error": reason}])
    _settled(r.job_id)


def _settled(job_id: int) -> None:
    """When no rank is still queued or capturing, the job moves on to its analyses (the
    conditional move lets exactly one agent start them)."""
    if JobRank.objects.filter(job_id=job_id, status__in=[RankStatus.QUEUED, RankStatus.CAPTURING]).exists():
        return
    Job.objects.filter(pk=job_id, capture_ended_at__isnull=True).update(capture_ended_at=timezone.now())
    for r in JobRank.objects.filter(job_id=job_id, status=RankStatus.ANALYSING, device__isnull=False):
        r.health = {**(r.health or {}), "snapshots": {**(r.health or {}).get("snapshots", {}),
                                                     "end": snapshot_facts(r.device_id)}}
        r.save(update_fields=["health"])
    start_analysis(job_id, [JobStatus.CAPTURING, JobStatus.QUEUED])

