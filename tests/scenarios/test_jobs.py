"""Distributed jobs through the services, in one process: capture every rank, analyse each,
combine, and ask the fleet why the straggler was slow."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from tests.support.jobs import running_job, same_software
from tests.support.traces import files_in, real_trace
from traces import writers
from traces.choices import JobStatus, RankStatus, TraceStatus
from traces.jobs import analysis as job_analysis
from traces.jobs import capture as job_capture
from traces.jobs import results as job_results
from traces.jobs import uploads as job_uploads
from traces.models import Job, Trace

pytestmark = [pytest.mark.django_db, pytest.mark.slow]  # a whole story across the fleet and its workers: slow tier

SHARED = ("multirank_sampled_rank0.json.gz", "multirank_sampled_rank1.json.gz", "ddp_nccl_rank0.json.gz")


def _analyse(job: Job) -> Job:
    """What the trace workers would do: every rank, then the cross-rank step."""
    for r in job.ranks.filter(status=RankStatus.ANALYSING):
        job_analysis.analyse_rank(job.pk, r.rank)
    job.refresh_from_db()
    if job.status == JobStatus.COMBINING:
        job_results.combine(job.pk)
    job.refresh_from_db()
    return job


def _capture(operator, devices, duration=1.5) -> Job:
    job = job_capture.request_job_capture(operator, devices, duration, name="bert")
    job_capture.run_job_capture(job.pk)
    job.refresh_from_db()
    return job


@pytest.mark.parametrize(("fault", "reason"), [("overheat", "Throttled"), ("pcie_degraded", "PCIe link degraded")])
def test_the_faulty_device_is_the_straggler_and_the_fleet_says_why(gpu_fleet, operator, trace_storage, fault, reason):
    devices = same_software(gpu_fleet, 4)
    victim = devices[2]
    running_job(devices, fault, victim)
    job = _capture(operator, devices)
    assert job.status == JobStatus.ANALYSING and job.capture_ended_at is not None
    assert all(r.status == RankStatus.ANALYSING and r.trace.status == TraceStatus.ANALYSING for r in job.ranks.all())
    job = _analyse(job)
    assert job.status == JobStatus.READY, job.error
    assert job.straggler_rank == 2 and job.straggler_device_id == victim.pk
    report = job_results.read_report(job)
    finding = report["straggler"]
    assert finding["device"] == victim.serial and finding["fleet_checked"]
    assert any(r["text"].startswith(reason) for r in finding["reasons"]), finding["reasons"]
    assert finding["delay_per_step_us"] > 0 and finding["waiting_total_us"] > finding["delay_total_us"]
    healthy = [r for r in report["fleet"].values() if r["device"] != victim.serial]
    assert all(not r["health"]["reasons"] for r in healthy), [r["health"]["reasons"] for r in healthy]
    assert job.summary["straggler"]["device"] == victim.serial
    # Each rank's trace is then analysed as any trace.
    assert all(r.trace.status == TraceStatus.ANALYSING for r in job.ranks.select_related("trace"))


def test_reasons_computed_before_the_store_held_the_window_come_from_the_snapshots_and_again_later(
        gpu_fleet, operator, trace_storage, settings, monkeypatch):
    """Right after a short capture the store may not hold the window's polls: the straggler's
    ECC storm is named all the same (from the capture's snapshots), the job says its reasons
    are pending and queues a recheck, which computes them from the series once they are there."""
    from tests.support.tsdb import unique_labels
    from traces import queueing

    devices = same_software(gpu_fleet, 4)
    polled_with = settings.TSDB_LABELS
    running_job(devices, "ecc_storm", devices[1])
    settings.TSDB_LABELS, settings.JOB_HEALTH_WAIT_S = unique_labels(), 0.2  # the store holds none of it (yet)
    queued = []
    monkeypatch.setattr(queueing, "send", lambda *args, **kwargs: queued.append((args, kwargs)))
    job = _analyse(_capture(operator, devices))
    assert job.status == JobStatus.READY and job.straggler_rank == 1, job.error
    reasons = job.summary["straggler"]["reasons"]
    assert reasons[0].startswith("ECC storm") and "computed again" in reasons[-1], reasons
    rechecks = [(a, k) for a, k in queued if a[0] == queueing.JOB_HEALTH_TASK]
    assert [(a[1], a[3], k["countdown"]) for a, k in rechecks] == [(job.pk, 1, settings.JOB_HEALTH_RECHECK_S)]
    # The store has the window now: the recheck reads it, and the reasons no longer say pending.
    settings.TSDB_LABELS = polled_with
    assert job_results.refresh_health(job.pk, 1) is True
    job.refresh_from_db()
    reasons = job.summary["straggler"]["reasons"]
    assert reasons[0].startswith("ECC storm") and not any("computed again" in r for r in reasons), reasons
    finding = job_results.read_report(job)["straggler"]
    assert finding["reasons"][0]["kind"] == "ecc" and all(r["kind"] != "history_pending" for r in finding["reasons"])
    assert job.ranks.get(rank=1).health["series_complete"] is True
    assert len([a for a, _ in queued if a[0] == queueing.JOB_HEALTH_TASK]) == 1  # nothing more to recheck


def test_each_captured_rank_is_queued_for_its_digest_as_soon_as_it_is_stored(gpu_fleet, operator, trace_storage,
                                                                               monkeypatch):
    """The workers digest the first ranks while the capture stores the others."""
    from traces import queueing

    devices = same_software(gpu_fleet, 3)
    running_job(devices, None, None)
    happened = []
    store = job_capture._store_rank

    def storing(r, capture, ended):
        happened.append(("stored", r.rank))
        store(r, capture, ended)

    def sent(task, job_id, limit_s, *more, **kwargs):
        if task == queueing.JOB_RANK_TASK:
            job = Job.objects.get(pk=job_id)
            later = set(job.ranks.filter(status=RankStatus.CAPTURING).values_list("rank", flat=True))
            happened.append(("queued", more[0], job.status, sorted(later)))

    monkeypatch.setattr(job_capture, "_store_rank", storing)
    monkeypatch.setattr(queueing, "send", sent)
    job = _capture(operator, devices)
    assert happened == [("stored", 0), ("queued", 0, JobStatus.ANALYSING, [1, 2]),
                        ("stored", 1), ("queued", 1, JobStatus.ANALYSING, [2]),
                        ("stored", 2), ("queued", 2, JobStatus.ANALYSING, [])]
    assert _analyse(job).status == JobStatus.READY


def test_a_healthy_job_names_no_straggler(gpu_fleet, operator, trace_storage):
    devices = same_software(gpu_fleet, 4)
    running_job(devices)
    job = _analyse(_capture(operator, devices))
    assert job.status == JobStatus.READY, job.error
    assert job.straggler_rank is None and job.summary["straggler"] is None
    report = job_results.read_report(job)
    assert report["collectives_matched"] > 0 and report["straggler"] is None
    window = job_results.timeline(job, 0, 8)
    assert window["count"] == 8 and len(window["ranks"]) == 4
    assert all(len(row["arrival_us"]) == 8 for row in window["ranks"])


def test_a_busy_device_runs_untraced_and_a_hung_one_fails_its_rank(gpu_fleet, operator, trace_storage):
    devices = same_software(gpu_fleet, 4)
    running_job(devices, "hang", devices[3])
    busy = writers.request_capture(devices[1], operator, 5)  # a capture of its own holds the device
    job = job_capture.request_job_capture(operator, devices, 1.0)
    ranks = {r.rank: r for r in job.ranks.all()}
    assert ranks[1].status == RankStatus.BUSY and f"trace {busy.pk}" in ranks[1].error and ranks[1].trace is None
    job_capture.run_job_capture(job.pk)
    ranks = {r.rank: r for r in Job.objects.get(pk=job.pk).ranks.select_related("trace")}
    assert ranks[3].status == RankStatus.FAILED and "stopped answering" in ranks[3].error
    assert ranks[3].trace.status == TraceStatus.FAILED
    assert ranks[0].status == ranks[2].status == RankStatus.ANALYSING
    job = _analyse(Job.objects.get(pk=job.pk))
    assert job.status == JobStatus.READY and job.summary["ranks_busy"] == 1 and job.summary["ranks_failed"] == 1
    missing = {m["rank"]: m["status"] for m in job_results.read_report(job)["missing_ranks"]}
    assert missing == {1: RankStatus.BUSY, 3: RankStatus.FAILED}


def test_every_device_busy_refuses_the_job_and_writes_nothing(gpu_fleet, operator, trace_storage):
    devices = same_software(gpu_fleet, 2)
    for d in devices:
        writers.request_capture(d, operator, 5)
    with pytest.raises(writers.DeviceBusy, match="every device of the job"):
        job_capture.request_job_capture(operator, devices, 1.0)
    assert not Job.objects.exists() and Trace.objects.count() == 2


def test_bad_job_requests_are_refused_with_the_reason(seeded_fleet, operator):
    with pytest.raises(writers.BadTrace, match="name the job's devices"):
        job_capture.job_devices()
    with pytest.raises(writers.BadTrace, match="no device with id 999999"):
        job_capture.job_devices(device_ids=[seeded_fleet[0].pk, 999999])
    with pytest.raises(writers.BadTrace, match="repeats"):
        job_capture.job_devices(device_ids=[seeded_fleet[0].pk] * 2)
    with pytest.raises(writers.BadTrace, match="one device type"):
        job_capture.job_devices(host=seeded_fleet[0].host.name)
    with pytest.raises(writers.BadTrace, match="no device matches host 'nowhere'"):
        job_capture.job_devices(host="nowhere")
    gpus = job_capture.job_devices(device_type="gpu")
    assert {d.device_type for d in gpus} == {"gpu"} and len(gpus) >= 2
    with pytest.raises(writers.BadTrace, match="duration_s"):
        job_capture.request_job_capture(operator, gpus, 0)
    with pytest.raises(writers.BadTrace, match="parallelism"):
        job_capture.request_job_capture(operator, gpus, 2, parallelism="pipeline")
    assert not Job.objects.exists()


def test_an_uploaded_job_reads_back_what_the_command_line_reads(operator, trace_storage, tmp_path):
    from traces.atrace.cli import main

    paths = [real_trace(name) for name in SHARED]
    files = [SimpleUploadedFile(p.name, p.read_bytes()) for p in paths]
    job = job_uploads.accept_job_upload(files, operator, name="shared")
    assert job.world_size == 3 and job.ranks.count() == 3
    job_analysis.start_analysis(job.pk, [JobStatus.QUEUED])
    job = _analyse(Job.objects.get(pk=job.pk))
    assert job.status == JobStatus.READY, job.error
    report = job_results.read_report(job)
    folder = tmp_path / "job"
    folder.mkdir()
    for p in paths:
        (folder / p.name).write_bytes(p.read_bytes())
    import contextlib
    import io
    import json

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["job", str(folder), "--json"]) == 0
    cli = json.loads(out.getvalue())
    assert report["collectives_matched"] == cli["collectives_matched"] > 0
    assert report["match_rule"] == cli["match_rule"]
    assert [r["communication"] for r in report["per_rank"]] == [r["communication"] for r in cli["per_rank"]]
    assert [r["file"] for r in report["per_rank"]] == [r["file"] for r in cli["per_rank"]]


def test_a_bad_file_refuses_the_whole_upload_and_keeps_nothing(operator, trace_storage):
    good = real_trace(SHARED[0])
    files = [SimpleUploadedFile(good.name, good.read_bytes()), SimpleUploadedFile("rank1.json", b'{"traceEvents": [1,')]
    with pytest.raises(writers.BadTrace, match="rank1.json"):
        job_uploads.accept_job_upload(files, operator)
    assert not Job.objects.exists() and not Trace.objects.exists()
    assert files_in(Path(trace_storage.location)) == []


def test_stuck_jobs_time_out_and_analysing_ranks_give_way(gpu_fleet, operator, trace_storage, settings):
    from datetime import timedelta

    from django.utils import timezone

    devices = same_software(gpu_fleet, 2)
    queued = job_capture.request_job_capture(operator, devices, 1.0)
    Job.objects.filter(pk=queued.pk).update(status_changed_at=timezone.now() - timedelta(seconds=settings.TRACE_QUEUE_TIMEOUT_S + 1))
    assert job_analysis.expire_stuck_jobs() >= 1
    queued.refresh_from_db()
    assert queued.status == JobStatus.FAILED and "no trace worker" in queued.error
    assert all(r.status == RankStatus.FAILED for r in queued.ranks.all())
    assert all(t.status == TraceStatus.FAILED for t in Trace.objects.filter(params__job=queued.pk))
