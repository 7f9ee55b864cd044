"""A job through real Celery workers: the per-rank analyses go to whichever of two worker
processes is free (each could be on its own machine: they share only the database, the
broker and the storage), each rank once, and the cross-rank step runs once, after the last
rank. A captured rank is queued the moment it is stored, so the worker that is not busy
storing the capture digests the first ranks meanwhile (which of the two takes which rank is
the broker's choice, not asserted)."""

from __future__ import annotations

import re
import time

import pytest

from tests.support.jobs import running_job, same_software
from tests.support.processes import child_env, start_worker
from tests.support.tiers import starts_processes
from traces.choices import JobStatus
from traces.models import Job
from traces.tasks import trace_queue

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


@pytest.fixture
@starts_processes
def two_workers(settings, tmp_path, trace_storage):
    env = child_env(TRACE_STORAGE_DIR=settings.TRACE_STORAGE_DIR)
    workers = [start_worker(env, concurrency=1, queue=trace_queue()) for _ in range(2)]
    yield workers
    for w in workers:
        w.stop()


def wait_for(job_id: int, statuses: set[str], timeout: float) -> Job:
    deadline = time.time() + timeout
    while time.time() < deadline:
        job = Job.objects.get(pk=job_id)
        if job.status in statuses:
            return job
        time.sleep(0.2)
    raise TimeoutError(f"job {job_id} still {Job.objects.get(pk=job_id).status} after {timeout} s")


def test_ranks_are_analysed_once_each_by_the_workers_and_combined_once(gpu_fleet, two_workers, api_client, operator):
    devices = same_software(gpu_fleet, 6)
    running_job(devices, "ecc_storm", devices[4])
    api_client.force_authenticate(operator)
    response = api_client.post("/api/jobs/capture/", {"devices": [d.pk for d in devices], "duration_s": 2}, format="json")
    assert response.status_code == 202
    job = wait_for(response.data["id"], {JobStatus.READY, JobStatus.FAILED}, 180)
    assert job.status == JobStatus.READY, f"{job.error}\n{[w.output() for w in two_workers]}"
    assert job.straggler_rank == 4 and job.straggler_device_id == devices[4].pk
    assert any("ECC storm" in r for r in job.summary["straggler"]["reasons"]), job.summary
    # The workers' log lines reach this process through their pipes a moment after the
    # database says READY: wait for the combine's line, then a second more for a second one.
    deadline = time.time() + 10
    while time.time() < deadline and not any(f"job {job.pk} combined" in w.output() for w in two_workers):
        time.sleep(0.1)
    time.sleep(1.0)
    logs = [w.output() for w in two_workers]
    ranks_done = sorted(int(r) for log in logs for r in re.findall(rf"job {job.pk} rank (\d+) digested", log))
    assert ranks_done == list(range(6)), ranks_done
    combined = sum(len(re.findall(rf"job {job.pk} combined", log)) for log in logs)
    assert combined == 1, logs
