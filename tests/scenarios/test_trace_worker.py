"""Captures and analyses through a real Celery worker on the traces queue."""

import os
import signal
import time
from pathlib import Path

import pytest

from tests.support.processes import child_env, start_worker
from tests.support.tiers import starts_processes
from tests.support.tracegen import write_kineto_trace
from traces.choices import TraceStatus
from traces.models import Trace
from traces.tasks import trace_queue

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


@pytest.fixture
@starts_processes
def trace_worker(seeded_fleet, trace_storage, settings):
    env = child_env(TRACE_STORAGE_DIR=settings.TRACE_STORAGE_DIR)
    worker = start_worker(env, concurrency=1, queue=trace_queue())
    yield worker
    worker.stop()


def wait_for(trace_id: int, statuses: set[str], timeout: float) -> Trace:
    deadline = time.time() + timeout
    while time.time() < deadline:
        trace = Trace.objects.get(pk=trace_id)
        if trace.status in statuses:
            return trace
        time.sleep(0.1)
    raise TimeoutError(f"trace {trace_id} still {Trace.objects.get(pk=trace_id).status} after {timeout} s")


def pool_children(pid: int) -> list[int]:
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    return [int(c) for c in children]


def test_capture_runs_on_the_traces_worker_to_ready(trace_worker, api_client, operator, seeded_fleet):
    api_client.force_authenticate(operator)
    device = seeded_fleet[2]
    response = api_client.post(f"/api/devices/{device.id}/capture/", {"duration_s": 2}, format="json")
    assert response.status_code == 202
    trace_id = response.data["id"]
    capturing = wait_for(trace_id, {TraceStatus.CAPTURING, TraceStatus.ANALYSING, TraceStatus.READY}, 30)
    assert capturing.capture_started_at is not None
    trace = wait_for(trace_id, {TraceStatus.READY, TraceStatus.FAILED}, 90)
    assert trace.status == TraceStatus.READY, f"{trace.error}\n{trace_worker.output()}"
    took = (trace.capture_ended_at - trace.capture_started_at).total_seconds()
    assert 1.9 <= took <= 15, took
    assert trace.events > 0 and trace.iterations_kept > 0
    rows = api_client.get(f"/api/traces/{trace_id}/breakdown/?side=device").data["results"]
    assert rows and all(r["side"] == "device" for r in rows)


def test_worker_killed_mid_analysis_ends_ready_or_failed_with_a_reason(trace_worker, api_client, operator, tmp_path):
    big = tmp_path / "big.json.gz"
    write_kineto_trace(big, 300_000, seed=3, shape="compact")  # the shape this test was sized for
    api_client.force_authenticate(operator)
    with big.open("rb") as f:
        response = api_client.post("/api/traces/", {"file": f}, format="multipart")
    assert response.status_code == 201, response.content
    trace_id = response.data["id"]
    wait_for(trace_id, {TraceStatus.ANALYSING}, 60)
    victims = pool_children(trace_worker.proc.pid)
    assert victims, trace_worker.output()
    for pid in victims:
        os.kill(pid, signal.SIGKILL)
    trace = wait_for(trace_id, {TraceStatus.READY, TraceStatus.FAILED}, 180)
    if trace.status == TraceStatus.READY:
        assert trace.attempts >= 2  # it was redelivered and analysed again
        assert trace.events > 200_000
    else:
        assert trace.error
