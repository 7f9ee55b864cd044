"""A capture of a real PyTorch process on a host with an agent: this test plays the agent of
node-a (its Kineto daemon serving a real training loop started with KINETO_USE_DAEMON=1),
asks for the capture as the page does, runs the agent's task, and analyses what it stored."""

from __future__ import annotations

import gzip
import threading
import time

import orjson
import pytest

from fleet.agent import run as agent_run
from fleet.agent.discovery import agent_host
from fleet.agent.queues import capture_process
from fleet.agent.registration import register_host
from fleet.models import Device, HostProcess
from tests.fleet.agent.conftest import agent_settings  # noqa: F401 - the fixture, here too
from tests.support.pytorch_jobs import served_daemon, training_process, wait_until
from traces import tasks, writers
from traces.choices import TraceStatus
from traces.models import Trace
from traces.processes import capture as process_capture
from traces.processes.requests import request_device_capture
from traces.store import results
from traces.store.files import TraceFiles

pytestmark = [pytest.mark.django_db, pytest.mark.integration]


@pytest.fixture
def kineto(agent_settings, tmp_path, monkeypatch):  # noqa: F811 - the imported fixture
    """node-a registered with its agent alive, and the agent's Kineto daemon serving."""
    register_host("node-a", "q.node-a", agent_host().devices)
    with served_daemon(tmp_path / "agent-traces") as daemon:
        monkeypatch.setattr(agent_run, "_kineto", daemon)
        yield daemon


@pytest.fixture
def training(kineto, tmp_path):
    with training_process(kineto, tmp_path, seconds=120,
                          env={"RANK": "0", "WORLD_SIZE": "1", "TORCHELASTIC_RUN_ID": "run-9"}) as proc:
        yield proc


def test_a_real_process_is_listed_captured_stored_and_analysed(kineto, training, operator, trace_storage, client):
    assert agent_run.report_kineto_processes("node-a") == 1
    listed = HostProcess.objects.get(host__name="node-a")
    assert (listed.pid, listed.role, listed.rank, listed.run_id) == (training.pid, "rank", 0, "run-9")
    device = Device.objects.filter(host__name="node-a").first()
    assert capture_process(device.host, device) == listed  # CPU-only: any device of its host captures it
    client.force_login(operator)
    page = client.get(f"/devices/{device.id}/").content.decode()
    assert f'data-pid="{training.pid}"' in page and f"Capture takes pid {training.pid}" in page
    assert 'id="capture-button"' in page
    (host,) = [h for h in client.get("/api/hosts/").json()["results"] if h["name"] == "node-a"]
    assert [(p["pid"], p["role"], p["rank"], p["run_id"]) for p in host["processes"]] == [(training.pid, "rank", 0, "run-9")]

    trace = request_device_capture(device, operator, 2)
    assert trace.params["pid"] == training.pid and trace.status == TraceStatus.QUEUED
    process_capture.run_process_capture(trace.pk)
    trace.refresh_from_db()
    assert trace.status == TraceStatus.ANALYSING, trace.error
    writers.analyse(trace.pk)
    trace.refresh_from_db()
    assert trace.status == TraceStatus.READY, trace.error
    assert 1.5e6 < trace.span_us < 4e6 and trace.events > 100
    summary = results.read_summary(TraceFiles(trace.pk))
    ops = {row["op"] if isinstance(row["op"], str) else summary["strings"][row["op"]] for row in summary["rows"]}
    assert "aten::addmm" in ops
    raw = TraceFiles(trace.pk).storage.open(trace.raw_file, "rb").read()
    assert orjson.loads(gzip.decompress(raw))["distributedInfo"]["rank"] == 0  # added: the job's rank
    assert not list(kineto.trace_dir.iterdir())  # the agent's copy is gone once stored


def test_a_process_that_exits_mid_capture_fails_the_trace_in_words(kineto, training, operator, trace_storage):
    agent_run.report_kineto_processes("node-a")
    device = Device.objects.filter(host__name="node-a").first()
    trace = request_device_capture(device, operator, 30)
    threading.Timer(7.0, training.kill).start()  # after its next poll took the capture
    process_capture.run_process_capture(trace.pk)
    trace = Trace.objects.get(pk=trace.pk)
    assert trace.status == TraceStatus.FAILED
    assert f"process {training.pid} exited during the capture" in trace.error


def test_no_process_on_the_host_refuses_the_capture_in_words(kineto, operator, trace_storage):
    device = Device.objects.filter(host__name="node-a").first()
    with pytest.raises(writers.CaptureUnavailable, match="no PyTorch process on device .* polls its agent"):
        request_device_capture(device, operator, 2)


def test_a_capture_by_iterations_takes_whole_optimizer_steps(kineto, training, operator, trace_storage):
    agent_run.report_kineto_processes("node-a")
    device = Device.objects.filter(host__name="node-a").first()
    trace = request_device_capture(device, operator, None, iterations="4")
    assert trace.params["iterations"] == 4
    process_capture.run_process_capture(trace.pk)
    trace.refresh_from_db()
    assert trace.status == TraceStatus.ANALYSING, trace.error
    raw = gzip.decompress(TraceFiles(trace.pk).storage.open(trace.raw_file, "rb").read())
    steps = [e for e in orjson.loads(raw)["traceEvents"] if e["name"] == "Optimizer.step#SGD.step"]
    assert len(steps) == 4


@pytest.mark.parametrize("bad", [0, 1001, "x", True, 2.5, "-3"])
def test_iterations_out_of_bounds_are_refused_in_words(kineto, operator, trace_storage, bad):
    device = Device.objects.filter(host__name="node-a").first()
    with pytest.raises(writers.BadTrace, match="iterations must be a whole number from 1 to 1000"):
        request_device_capture(device, operator, None, iterations=bad)
    assert not Trace.objects.exists()


def test_iterations_are_refused_on_an_emulated_device(seeded_fleet, operator, trace_storage):
    with pytest.raises(writers.BadTrace, match="a capture by iterations is of a real PyTorch process"):
        request_device_capture(seeded_fleet[0], operator, None, iterations=3)


@pytest.mark.django_db(transaction=True)
def test_the_agents_worker_is_free_while_a_process_is_captured(kineto, training, operator, trace_storage):
    """The agent runs one task at a time (Celery's solo pool): the capture runs in a thread
    of its own, so the task returns at once and the device polls queued behind it still run."""
    agent_run.report_kineto_processes("node-a")
    device = Device.objects.filter(host__name="node-a").first()
    trace = request_device_capture(device, operator, 2)
    began = time.monotonic()
    tasks.capture_process.run(trace.pk)
    assert time.monotonic() - began < 1.0
    assert Trace.objects.get(pk=trace.pk).status in (TraceStatus.QUEUED, TraceStatus.CAPTURING)
    wait_until(lambda: Trace.objects.get(pk=trace.pk).status not in (TraceStatus.QUEUED, TraceStatus.CAPTURING), 40,
               "the capture never ended")
    trace.refresh_from_db()
    assert trace.status == TraceStatus.ANALYSING, trace.error
