"""A job whose ranks arrive one at a time, each analysed the moment it arrives.

The hosts of a training job finish at different moments, and each holds its own rank's
trace only. :func:`open_job` makes a job that expects ``world_size`` ranks; each host then
sends its file (:func:`accept_rank`: the check a job upload gets, so a bad file is a 400
naming it and leaves nothing behind), and that rank's digest is queued at once. The trace
workers digest ranks while the others are still arriving, and the cross-rank step starts
when the last expected rank is digested (``analysis.maybe_combine``): the findings follow
the last rank by the time to digest that one rank, not by a pass over all of them.

Ranks that have not arrived by the job's deadline (``wait_s``, JOB_RANKS_WAIT_S) are
recorded as missing and the job is combined with the ranks it has (:func:`close_overdue`,
run by beat with the other timeouts); a job no rank reached fails, saying so.
"""

from __future__ import annotations

import contextlib
import logging
from datetime import datetime, timedelta
from pathlib import PurePath

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone
from kombu.exceptions import OperationalError as BrokerUnavailable

from traces import writers
from traces.atrace.io.jobs import rank_said
from traces.choices import JobStatus, RankStatus, TraceSource
from traces.jobs.analysis import enqueue, fail_job, maybe_combine, move_job, push_ranks
from traces.jobs.uploads import store_rank_file
from traces.models import Job, JobRank
from traces.queueing import JOB_RANK_TASK
from traces.refusals import TraceRefused
from traces.store.files import TraceFiles
from traces.uploads.sessions import Source

log = logging.getLogger(__name__)


class RankNotTaken(TraceRefused):
    """The job takes no more ranks, or already has this one."""

    status = 409


def open_job(user, world_size: int, *, name: str = "", wait_s: float | None = None) -> Job:
    """A job expecting ``world_size`` ranks, sent one at a time until ``wait_s`` from now."""
    wait_s = settings.JOB_RANKS_WAIT_S if wait_s is None else wait_s
    due = timezone.now() + timedelta(seconds=wait_s)
    return Job.objects.create(
        name=(name or f"job of {world_size} ranks")[:200], source=TraceSource.UPLOAD, created_by=user,
        world_size=world_size, params={"open": True, "ranks_due_at": due.isoformat(), "files": []},
    )


def is_open(job: Job) -> bool:
    """Whether the job still takes ranks."""
    return bool(job.params.get("open")) and job.status in (JobStatus.QUEUED, JobStatus.ANALYSING)


def ranks_due_at(job: Job) -> datetime | None:
    due = job.params.get("ranks_due_at")
    return datetime.fromisoformat(due) if due else None


def accept_rank(job: Job, uploaded: Source, user, *, rank: int | None = None) -> JobRank:
    """Check and store one rank's trace file and queue its digest. ``rank``: the sender's
    word, else the trace's ``distributedInfo.rank``, else the number in the file's name.
    Raises BadTrace (the file, or no rank known) or RankNotTaken, leaving nothing behind."""
    if not is_open(job):
        raise RankNotTaken(_closed(job))
    checked = writers.check_trace_file(uploaded)
    filename = PurePath(uploaded.name).name
    rank = _rank(job, checked.meta, filename, rank)
    stored = None
    try:
        with writers.budget_held(needed=not uploaded.uploads):
            writers.take_room(uploaded)
            stored = store_rank_file(uploaded, checked, filename, job, rank, user)
            # The job's row is locked only now, after the copy, until the commit just after.
            locked = Job.objects.select_for_update().get(pk=job.pk)
            if not is_open(locked):
                raise RankNotTaken(_closed(locked))
            row = JobRank.objects.create(job=locked, rank=rank, status=RankStatus.ANALYSING, trace=stored,
                                         host_name=str(checked.meta.get("host", ""))[:128])
            _note_file(locked, filename, str(checked.meta.get("device_type", ""))[:32])
            transaction.on_commit(lambda: _arrived(job.pk, rank))
    except IntegrityError:
        _forget(stored)
        raise RankNotTaken(f"job {job.pk} already has rank {rank}") from None
    except BaseException:
        _forget(stored)
        raise
    return row


def _closed(job: Job) -> str:
    if "open" not in job.params:
        return f"job {job.pk} was sent whole: it takes no ranks one at a time"
    if job.status in (JobStatus.QUEUED, JobStatus.ANALYSING):
        return f"job {job.pk} takes no more ranks: all {job.world_size} are in, or its deadline passed"
    return f"job {job.pk} takes no more ranks: it is {job.status}"


def _rank(job: Job, meta: dict, filename: str, said: int | None) -> int:
    if said is None:
        said = rank_said(meta, filename)
    if said is None:
        raise writers.BadTrace(f"{filename}: which rank is it? The trace has no distributedInfo.rank and its "
                               "name no rank number: send the field 'rank'")
    if not 0 <= said < job.world_size:
        raise writers.BadTrace(f"{filename}: rank {said} is outside the job's {job.world_size} ranks "
                               f"(0 to {job.world_size - 1})")
    return said


def _note_file(job: Job, filename: str, device_type: str) -> None:
    """The job's files in order of arrival, and its device type (blank once they differ);
    the job is closed when its last rank is in (its ranks' timeouts count from then)."""
    first = not job.params["files"]
    job.params["files"].append(filename)
    fields = {"params": job.params}
    if len(job.params["files"]) >= job.world_size:
        job.params["open"] = False
        fields["status_changed_at"] = timezone.now()
    if first:
        fields["device_type"] = device_type
    elif job.device_type != device_type:
        fields["device_type"] = ""
    Job.objects.filter(pk=job.pk).update(**fields)


def _forget(trace) -> None:
    if trace is not None:
        TraceFiles(trace.pk).delete_all()


def _arrived(job_id: int, rank: int) -> None:
    """The first rank in starts the job's analysis; every rank's digest is queued now."""
    move_job(job_id, [JobStatus.QUEUED], JobStatus.ANALYSING, analysis_started_at=timezone.now(), progress=0.0)
    push_ranks(job_id, 0.0, [{"rank": rank, "status": RankStatus.ANALYSING, "progress": 0.0, "events": None,
                              "error": ""}])
    with contextlib.suppress(BrokerUnavailable):  # the job has failed, saying so (enqueue)
        enqueue(job_id, JOB_RANK_TASK, settings.TRACE_ANALYSIS_TIMEOUT_S, rank)


def close_overdue(now=None) -> int:
    """Close every open job past its deadline: the ranks that did not arrive are recorded as
    missing, and the job is combined with the ones it has (or fails when it has none)."""
    now = now or timezone.now()
    closed = 0
    for job in Job.objects.filter(status__in=[JobStatus.QUEUED, JobStatus.ANALYSING]):
        due = ranks_due_at(job)
        if not job.params.get("open") or due is None or due > now:
            continue
        with transaction.atomic():
            locked = Job.objects.select_for_update().get(pk=job.pk)
            if not is_open(locked):
                continue
            locked.params["open"] = False  # the ranks still analysing get their timeout from now
            Job.objects.filter(pk=job.pk).update(params=locked.params, status_changed_at=now)
            have = set(JobRank.objects.filter(job=job).values_list("rank", flat=True))
            why = f"did not arrive by {due.isoformat(timespec='seconds')}"
            JobRank.objects.bulk_create([JobRank(job=job, rank=r, status=RankStatus.FAILED, error=why)
                                         for r in range(job.world_size) if r not in have])
        closed += 1
        log.info("job %s closed at its deadline with %d of %d ranks", job.pk, len(have), job.world_size)
        if not have:
            fail_job(job.pk, f"no rank arrived by {due.isoformat(timespec='seconds')}", [JobStatus.QUEUED])
        else:
            maybe_combine(job.pk)
    return closed
