"""A job whose ranks are sent one at a time: each rank is digested when it arrives, the
cross-rank step follows the last one, and ranks that never come are recorded as missing at
the job's deadline."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.utils import timezone

from tests.support.traces import real_trace
from traces import queueing, writers
from traces.choices import JobStatus, RankStatus
from traces.jobs import analysis as job_analysis
from traces.jobs import arrivals
from traces.jobs import results as job_results
from traces.jobs.uploads import accept_job_upload
from traces.models import Job, JobRank, Trace
from traces.uploads.sources import Source

pytestmark = pytest.mark.django_db

RANK0, RANK1 = "multirank_sampled_rank0.json.gz", "multirank_sampled_rank1.json.gz"


@pytest.fixture
def queued(monkeypatch):
    """The tasks sent to the trace workers (the broker is not what is tested)."""
    sent = []
    monkeypatch.setattr(queueing, "send", lambda *args, **kwargs: sent.append(args))
    return sent


def source(name: str, as_name: str | None = None) -> Source:
    return Source.of_file(SimpleUploadedFile(as_name or name, real_trace(name).read_bytes()))


def send(job, name, user, django_capture_on_commit_callbacks, **kwargs):
    with django_capture_on_commit_callbacks(execute=True):
        return arrivals.accept_rank(Job.objects.get(pk=job.pk), source(name, kwargs.pop("as_name", None)), user,
                                    **kwargs)


def test_each_rank_is_digested_as_it_arrives_and_the_last_starts_the_cross_rank_step(
        operator, trace_storage, queued, django_capture_on_commit_callbacks, settings):
    job = arrivals.open_job(operator, 2, name="two hosts")
    assert job.status == JobStatus.QUEUED and job.params["open"] is True
    row = send(job, RANK1, operator, django_capture_on_commit_callbacks)  # its distributedInfo says rank 1
    assert row.rank == 1 and row.status == RankStatus.ANALYSING
    job.refresh_from_db()
    assert job.status == JobStatus.ANALYSING and job.params["files"] == [RANK1]
    assert queued == [(queueing.JOB_RANK_TASK, job.pk, settings.TRACE_ANALYSIS_TIMEOUT_S, 1)]
    job_analysis.analyse_rank(job.pk, 1)  # what the worker does with it, before rank 0 exists
    job.refresh_from_db()
    assert JobRank.objects.get(job=job, rank=1).status == RankStatus.READY
    assert job.status == JobStatus.ANALYSING  # rank 0 is still to come: no cross-rank step

    send(job, RANK0, operator, django_capture_on_commit_callbacks)
    job.refresh_from_db()
    assert job.params["open"] is False  # all its ranks are in
    assert queued[-1][-1] == 0
    job_analysis.analyse_rank(job.pk, 0)
    job.refresh_from_db()
    assert job.status == JobStatus.COMBINING
    job_results.combine(job.pk)
    job.refresh_from_db()
    assert job.status == JobStatus.READY, job.error
    report = job_results.read_report(job)
    assert [row["rank"] for row in report["per_rank"]] == [0, 1] and report["missing_ranks"] == []
    assert report["collectives_matched"] > 0


def test_a_rank_the_job_cannot_take_is_refused_and_leaves_nothing(operator, trace_storage, queued, settings,
                                                                  django_capture_on_commit_callbacks):
    job = arrivals.open_job(operator, 2)
    send(job, RANK1, operator, django_capture_on_commit_callbacks)
    traces_before = Trace.objects.count()
    with pytest.raises(arrivals.RankNotTaken, match="already has rank 1"):
        send(job, RANK1, operator, django_capture_on_commit_callbacks)
    with pytest.raises(writers.BadTrace, match="rank 5 is outside the job's 2 ranks"):
        send(job, RANK0, operator, django_capture_on_commit_callbacks, rank=5)
    with pytest.raises(writers.BadTrace, match="which rank is it"):
        send(job, "h100_bert_infer.json.gz", operator, django_capture_on_commit_callbacks)
    bad = Source.of_file(SimpleUploadedFile("rank0.json", b'{"traceEvents": [{"ph": "X", "ts": 1,'))
    with pytest.raises(writers.BadTrace, match="rank0.json"):
        arrivals.accept_rank(job, bad, operator)
    assert Trace.objects.count() == traces_before and JobRank.objects.filter(job=job).count() == 1
    stored = sorted(p.name for p in settings.TRACE_STORAGE_DIR.rglob("*") if p.is_file())
    assert len(stored) == 1, stored  # the one rank's raw file, nothing of the refused ones

    # A name's rank number counts when the trace does not say; the job is then full.
    send(job, "h100_bert_infer.json.gz", operator, django_capture_on_commit_callbacks, as_name="bert_rank0.json.gz")
    with pytest.raises(arrivals.RankNotTaken, match="all 2 are in"):
        send(job, RANK0, operator, django_capture_on_commit_callbacks, rank=0)
    whole = accept_job_upload([SimpleUploadedFile(RANK0, real_trace(RANK0).read_bytes())], operator)
    with pytest.raises(arrivals.RankNotTaken, match="sent whole"):
        send(whole, RANK0, operator, django_capture_on_commit_callbacks)


def test_ranks_that_never_arrive_are_missing_at_the_deadline_and_the_job_goes_on(
        operator, trace_storage, queued, django_capture_on_commit_callbacks, settings):
    job = arrivals.open_job(operator, 3, wait_s=60)
    empty = arrivals.open_job(operator, 2, wait_s=60)
    send(job, RANK1, operator, django_capture_on_commit_callbacks)
    job_analysis.analyse_rank(job.pk, 1)
    # The queue's and the analysis' own timeouts leave an open job alone: it has its deadline.
    later = timezone.now() + timedelta(seconds=settings.TRACE_QUEUE_TIMEOUT_S + settings.TRACE_ANALYSIS_TIMEOUT_S)
    assert job_analysis.expire_stuck_jobs(now=later) == 0
    assert arrivals.close_overdue(now=timezone.now() + timedelta(seconds=30)) == 0  # before its deadline

    assert arrivals.close_overdue(now=timezone.now() + timedelta(seconds=61)) == 2
    empty.refresh_from_db()
    assert empty.status == JobStatus.FAILED and "no rank arrived by" in empty.error
    job.refresh_from_db()
    assert job.status == JobStatus.COMBINING
    missing = JobRank.objects.filter(job=job, status=RankStatus.FAILED).order_by("rank")
    assert [r.rank for r in missing] == [0, 2] and all("did not arrive by" in r.error for r in missing)
    job_results.combine(job.pk)
    job.refresh_from_db()
    assert job.status == JobStatus.READY, job.error
    assert [m["rank"] for m in job_results.read_report(job)["missing_ranks"]] == [0, 2]
    with pytest.raises(arrivals.RankNotTaken, match="it is ready"):
        send(job, RANK0, operator, django_capture_on_commit_callbacks)


def test_the_job_page_says_how_many_ranks_are_in(client, viewer, operator, trace_storage, queued,
                                                  django_capture_on_commit_callbacks):
    job = arrivals.open_job(operator, 4)
    send(job, RANK1, operator, django_capture_on_commit_callbacks)
    client.force_login(viewer)
    page = client.get(f"/traces/jobs/{job.pk}/").content.decode()
    assert 'id="job-waiting"' in page and '<span id="job-arrived">1</span> of 4 in' in page
