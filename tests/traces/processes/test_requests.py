"""Capturing the PyTorch processes of a real machine from its host page and the API: a
process chosen by its pid, a whole job by its run id across the hosts whose agents its ranks
poll; every refusal in words, and nothing written when refused. (The capture itself, on real
processes: tests/traces/processes/test_capture.py and tests/browser/test_real_capture.py.)"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from fleet.models import Host
from traces.choices import TraceStatus
from traces.models import Trace

pytestmark = pytest.mark.django_db


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
