"""Capturing the PyTorch processes of a real machine from its host page and the API: a
process chosen by its pid, a whole job by its run id across the hosts whose agents its ranks
poll; every refusal in words, and nothing written when refused. (The capture itself, on real
processes: tests/traces/test_process_capture.py and tests/browser/test_real_capture.py.)"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest

from fleet.agent.registration import register_host
from fleet.models import Device, Host, HostProcess
from traces.choices import JobStatus, RankStatus, TraceStatus
from traces.jobs.process_jobs import JOB_START_LEAD_S
from traces.models import Job, JobRank, Trace

pytestmark = pytest.mark.django_db


def _process(host: Host, pid: int, role: str = "process", parent: int | None = None, gpus=(), **job) -> HostProcess:
    now = datetime.now(tz=UTC)
    return HostProcess.objects.create(host=host, pid=pid, role=role, parent=parent, job=job, gpus=list(gpus),
                                      command=f"python train.py --pid {pid}", first_seen=now, last_poll=now)


@pytest.fixture
def machines(db):
    """Two machines without accelerators, their agents alive: a torchrun job of world size 3
    has its launcher and rank 0 on node-a, rank 1 on node-b, and rank 2 nowhere; node-a also
    runs a lone process."""
    a = register_host("node-a", "q.node-a", []).host
    b = register_host("node-b", "q.node-b", []).host
    run = {"TORCHELASTIC_RUN_ID": "run-7", "WORLD_SIZE": "3"}
    _process(a, 100, "launcher", **run)
    _process(a, 101, "rank", parent=100, RANK="0", **run)
    _process(b, 201, "rank", parent=200, RANK="1", **run)
    _process(a, 300)
    return a, b


def _capture(client, host: Host, **body):
    return client.post(f"/api/hosts/{host.pk}/capture/", body, content_type="application/json")


def test_the_host_page_lists_its_processes_and_its_jobs(client, operator, viewer, machines):
    a, _b = machines
    client.force_login(operator)
    page = client.get(f"/hosts/{a.pk}/").content.decode()
    assert "polled by its agent" in page and "The agent finds no accelerator on this machine" in page
    for pid in (100, 101, 300):
        assert f'data-pid="{pid}"' in page
    assert 'value="101"' in page and 'value="100"' not in page  # a launcher cannot be chosen
    assert 'id="capture-button"' in page and 'data-run-id="run-7"' in page and "(1 rank here)" in page
    client.force_login(viewer)
    page = client.get(f"/hosts/{a.pk}/").content.decode()
    assert 'data-pid="101"' in page and 'id="capture-button"' not in page
    assert "node-a" in client.get("/").content.decode().split('id="agent-hosts"')[1].split("</section>")[0]


def test_a_process_is_captured_by_its_pid(client, operator, machines):
    a, _b = machines
    client.force_login(operator)
    answer = _capture(client, a, pid=101, duration_s=2)
    assert answer.status_code == 202, answer.content
    trace = Trace.objects.get(pk=answer.json()["id"])
    assert (trace.status, trace.host_name, trace.device, trace.device_type) == (TraceStatus.QUEUED, "node-a", None, "cpu")
    assert trace.params | {"command": ""} == {"duration_s": 2.0, "pid": 101, "command": "", "rank": 0, "world_size": 3}
    answer = _capture(client, a, pid=300, iterations=5)
    assert answer.status_code == 202 and Trace.objects.get(pk=answer.json()["id"]).params["iterations"] == 5


@pytest.mark.parametrize(("body", "status", "words"), [
    ({"pid": 999}, 400, "no PyTorch process 999 polls node-a's agent now"),
    ({"pid": 201}, 400, "no PyTorch process 201 polls node-a's agent now"),  # node-b's
    ({"pid": 100}, 400, "process 100 is a job's launcher: it runs no PyTorch work of its own; capture one of its ranks (pids 101)"),
    ({"pid": "x"}, 400, "pid"),
    ({}, 400, "pid"),
    ({"pid": 101, "duration_s": 600}, 400, "duration_s must be between"),
    ({"pid": 101, "iterations": 0}, 400, "iterations"),
])
def test_a_bad_capture_is_refused_in_words_and_writes_nothing(client, operator, machines, body, status, words):
    client.force_login(operator)
    answer = _capture(client, machines[0], **body)
    assert answer.status_code == status and words in answer.content.decode(), answer.content
    assert not Trace.objects.exists()


def test_a_second_capture_of_a_process_being_captured_is_refused(client, operator, machines):
    client.force_login(operator)
    first = _capture(client, machines[0], pid=101, duration_s=2).json()["id"]
    answer = _capture(client, machines[0], pid=101, duration_s=2)
    assert answer.status_code == 409
    assert f"process 101 on node-a is already being captured (trace {first}, queued)" in answer.json()["detail"]


def test_no_capture_where_the_agent_is_not_running(client, operator, machines):
    a, _b = machines
    Host.objects.filter(pk=a.pk).update(agent_seen_at=datetime.now(tz=UTC) - timedelta(hours=1))
    client.force_login(operator)
    answer = _capture(client, a, pid=101, duration_s=2)
    assert answer.status_code == 409 and "node-a's agent is not running" in answer.json()["detail"]
    assert "No trace capture here: node-a&#x27;s agent is not running" in client.get(f"/hosts/{a.pk}/").content.decode()


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
    single = _capture(client, machines[1], pid=201, duration_s=2).json()["id"]
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
