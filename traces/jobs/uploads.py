"""Uploading a distributed job: one trace file per rank (a set of files, or a folder's).

Each file gets the check a trace upload gets (the engine's streaming scan: a bad file is a
400 naming it, and nothing is kept), then a Trace row and a JobRank. Ranks are numbered as
the command line's ``job`` numbers them (``traces.atrace.io.jobs.rank_numbers`` on the files
in name order, as a folder is read), so the job reads back the same ranks. The per-rank
analyses are fanned out when the rows commit (traces/jobs/analysis.py).
"""

from __future__ import annotations

from pathlib import PurePath

from django.conf import settings
from django.db import transaction

from traces import writers
from traces.atrace.io.jobs import rank_numbers
from traces.choices import JobStatus, RankStatus, TraceSource
from traces.jobs.analysis import start_analysis
from traces.models import Job, JobRank, Trace
from traces.store.files import TraceFiles
from traces.uploads.sessions import Source


def accept_job_upload(uploaded: list, user, *, name: str = "") -> Job:
    """Look at every file's head, store them, and queue the job's analysis. A bad head raises
    BadTrace and leaves no row and no file behind. ``uploaded``: traces.uploads.sessions.Source
    objects (or Django uploaded files)."""
    if not uploaded:
        raise writers.BadTrace("no files: upload one trace file per rank (or a folder of them)")
    if len(uploaded) > settings.JOB_MAX_RANKS:
        raise writers.BadTrace(f"{len(uploaded)} files: a job has at most {settings.JOB_MAX_RANKS} ranks (JOB_MAX_RANKS)")
    uploaded = sorted((f if isinstance(f, Source) else Source.of_file(f) for f in uploaded),
                      key=lambda f: PurePath(f.name).name)
    checked = [writers.check_trace_file(f) for f in uploaded]
    names = [PurePath(f.name).name for f in uploaded]
    ranks = rank_numbers([c.meta for c in checked], names)
    types = {str(c.meta.get("device_type", "")) for c in checked}
    created: list[int] = []
    try:
        with writers.budget_held(needed=not all(f.uploads for f in uploaded)):
            writers.take_room(*uploaded)
            job = Job.objects.create(
                name=(name or (f"{names[0]} and {len(names) - 1} more" if len(names) > 1 else names[0]))[:200],
                source=TraceSource.UPLOAD, created_by=user, world_size=len(uploaded),
                device_type=types.pop()[:32] if len(types) == 1 else "", params={"files": names},
            )
            for file, check, rank, filename in zip(uploaded, checked, ranks, names):
                trace = store_rank_file(file, check, filename, job, rank, user)
                created.append(trace.pk)
                JobRank.objects.create(job=job, rank=rank, status=RankStatus.ANALYSING, trace=trace,
                                       host_name=str(check.meta.get("host", ""))[:128])
            transaction.on_commit(lambda: start_analysis(job.pk, [JobStatus.QUEUED]))
    except BaseException:
        for trace_id in created:
            TraceFiles(trace_id).delete_all()
        raise
    return job


def store_rank_file(file, check, filename: str, job: Job, rank: int, user) -> Trace:
    """A rank's Trace row and its raw file (stored from ``file``, checked as ``check``)."""
    meta = check.meta
    trace = Trace.objects.create(
        name=filename[:200], source=TraceSource.UPLOAD, created_by=user,
        params={"file": filename, "job": job.pk, "rank": rank},
        device_type=str(meta.get("device_type", ""))[:32], sw_version=str(meta.get("sw_version", ""))[:32],
        workload=str(meta.get("workload", ""))[:64], raw_format=check.format[:16],
    )
    stored = writers.store_raw(trace.pk, file)
    Trace.objects.filter(pk=trace.pk).update(raw_file=stored, raw_bytes=file.size, stored_bytes=file.size)
    trace.raw_file = stored
    return trace
