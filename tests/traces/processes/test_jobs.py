"""Capturing a real PyTorch job by its run id across the hosts whose agents its ranks poll:
the ranks started together (one wall-clock instant, or a common iteration), a rank no agent
hears failed in words, a busy one untraced, a GPU rank tied to its device; refusals in words. (The capture itself, on real
processes: tests/traces/processes/test_capture.py and tests/browser/test_real_capture.py.)"""

from __future__ import annotations

import time

import pytest

from fleet.models import Device, HostProcess
from traces.choices import JobStatus, RankStatus
from traces.models import Job, JobRank, Trace
from traces.processes.jobs import JOB_START_LEAD_S

pytestmark = pytest.mark.django_db


def test_a_job_is_captured_by_its_run_id_on_every_host_its_ranks_poll(client, operator, machines):
    client.force_login(operator)
    asked = time.time()
    answer = client.post("/api/jobs/capture/", {"run_id": "run-7", "duration_s": 2}, content_type="application/json")
    assert answer.status_code == 202, answer.content
    job = Job.objects.get(pk=answer.json()["id"])
    assert (job.status, job.world_size, job.params["run_id"]) == (JobStatus.QUEUED, 3, "run-7")
    assert asked + JOB_START_LEAD_S - 1 < job.params["start_time_ms"] / 1000 < time.time() + JOB_START_LEAD_S + 1
    ranks = {r.rank: r for r in JobRank.objects.filter(job=job).select_related("trace")}
    assert [(r, ranks[r].host_name, ranks[r].status) for r in range(3)] == [
        (0, "node-a", RankStatus.QUEUED), (1, "node-b", RankStatus.QUEUED), (2, "", RankStatus.FAILED)]
    assert ranks[2].error == "rank 2 of job run-7 polls no running agent: not captured"
    for rank, pid in ((0, 101), (1, 201)):
        params = ranks[rank].trace.params
        assert (params["pid"], params["rank"], params["job"], params["start_time_ms"]) == (
            pid, rank, job.pk, job.params["start_time_ms"])


def test_a_job_by_iterations_starts_every_rank_on_a_common_iteration(client, operator, machines, settings):
    settings.JOB_ITERATION_ROUNDUP = 250
    client.force_login(operator)
    answer = client.post("/api/jobs/capture/", {"run_id": "run-7", "iterations": 4}, content_type="application/json")
    job = Job.objects.get(pk=answer.json()["id"])
    params = [r.trace.params for r in JobRank.objects.filter(job=job, trace__isnull=False)]
    assert [(p["iterations"], p["iteration_roundup"], "start_time_ms" in p) for p in params] == [(4, 250, False)] * 2


def test_a_rank_being_captured_runs_untraced_in_the_job(client, operator, machines):
    client.force_login(operator)
    single = client.post(f"/api/hosts/{machines[1].pk}/capture/", {"pid": 201, "duration_s": 2},
                         content_type="application/json").json()["id"]
    job = Job.objects.get(pk=client.post("/api/jobs/capture/", {"run_id": "run-7"}, content_type="application/json").json()["id"])
    busy = JobRank.objects.get(job=job, rank=1)
    assert busy.status == RankStatus.BUSY and f"(trace {single})" in busy.error and busy.trace is None


@pytest.mark.parametrize(("body", "status", "words"), [
    ({"run_id": "run-404"}, 409, "no rank of job 'run-404' polls a running agent"),
    ({"run_id": "run-7", "devices": [1]}, 400, "a job is named by its run id or by its devices, not both"),
    ({"run_id": "x" * 200}, 400, "run_id"),
])
def test_a_bad_job_capture_is_refused_in_words_and_writes_nothing(client, operator, machines, body, status, words):
    client.force_login(operator)
    answer = client.post("/api/jobs/capture/", body, content_type="application/json")
    assert answer.status_code == status and words in answer.content.decode(), answer.content
    assert not Job.objects.exists() and not Trace.objects.exists()


def test_a_gpu_rank_of_a_job_is_tied_to_its_device(client, operator, machines):
    """A rank that created a context on GPU 2 of node-b: its rank and trace name that device,
    whose health the job's findings read."""
    _a, b = machines
    gpu = Device.objects.create(host=b, serial="GPU-b2", device_type="gpu", model="H100", index=2)
    HostProcess.objects.filter(host=b, pid=201).update(gpus=[2])
    client.force_login(operator)
    job = Job.objects.get(pk=client.post("/api/jobs/capture/", {"run_id": "run-7"}, content_type="application/json").json()["id"])
    rank = JobRank.objects.select_related("trace").get(job=job, rank=1)
    assert (rank.device, rank.device_serial, rank.trace.device, rank.trace.device_type) == (gpu, "GPU-b2", gpu, "gpu")
