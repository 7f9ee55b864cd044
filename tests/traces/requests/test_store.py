"""The request spans' housekeeping is periodic tasks', never a request's: the OTLP receiver
only inserts (expired spans stay until the pruning task runs), a page or the API only reads
(live spans wait for the attaching task, or the join), and the tasks attach a capture's live
spans and delete the expired ones."""

import time
from datetime import UTC, datetime, timedelta

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from opentelemetry.exporter.otlp.json.common._internal.trace_encoder import (
    encode_spans as encode_json,
)

from dashboard import celery_app
from tests.support.otlp import protobuf_body, sdk_spans
from tests.support.serving import serving_files
from traces import queueing, writers
from traces import tasks as trace_tasks
from traces.atrace.io.otlp import read_otlp_json
from traces.choices import TraceStatus
from traces.models import Trace
from traces.requests import service
from traces.requests.models import RequestSpan
from traces.requests.store import ATTACH_AFTER_CAPTURE, attach_to_recent_captures, store_spans

pytestmark = pytest.mark.django_db
TOKEN = "otlp-housekeeping"
WRITES = ("INSERT", "UPDATE", "DELETE")


def _writes(queries) -> list[str]:
    return [q["sql"] for q in queries.captured_queries if q["sql"].lstrip().upper().startswith(WRITES)]


def _at(ns: int) -> datetime:
    return datetime.fromtimestamp(ns / 1e9, UTC)


@pytest.fixture
def captured(operator, trace_storage, tmp_path):
    """A ready capture of a serving device that ended seconds ago, the spans its service
    sent over OTLP waiting in the live window, and one request of another time."""
    t0 = time.time_ns() - 20 * 10**9
    raw, spans, run = serving_files(tmp_path, seed=5, duration=1.0, t0_ns=t0)
    trace = writers.accept_upload(SimpleUploadedFile("served.json", raw), operator, name="served")
    writers.analyse(trace.pk)
    Trace.objects.filter(pk=trace.pk).update(capture_started_at=_at(t0 - 10**9), capture_ended_at=_at(t0 + 3 * 10**9))
    trace.refresh_from_db()
    assert trace.status == TraceStatus.READY, trace.error
    with spans.open("rb") as f:
        store_spans(read_otlp_json(f))
    other = encode_json(sdk_spans(1, t0_ns=t0 - 3600 * 10**9)).to_json().encode()  # as a Collector's file line
    store_spans(read_otlp_json([other]))
    return trace, run


def test_an_otlp_request_deletes_nothing_and_the_pruning_task_does(client, settings):
    settings.OTLP_TOKEN, settings.SPAN_RETENTION_HOURS = TOKEN, 1
    RequestSpan.objects.create(otel_trace_id="a" * 32, span_id="b" * 16, name="llm_request", start_ns=1, end_ns=2)
    RequestSpan.objects.update(received_at=timezone.now() - timedelta(hours=2))  # expired
    with CaptureQueriesContext(connection) as queries:
        answer = client.post("/v1/traces", data=protobuf_body(sdk_spans(2)), content_type="application/x-protobuf",
                             HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert answer.status_code == 200
    assert not [sql for sql in _writes(queries) if sql.lstrip().upper().startswith("DELETE")]
    assert RequestSpan.objects.count() == 1 + 8  # the expired one is still there
    assert trace_tasks.prune_request_spans.apply().get() == 1
    assert RequestSpan.objects.count() == 8 and not RequestSpan.objects.filter(start_ns=1).exists()


def test_reading_a_capture_s_requests_writes_nothing(client, api_client, viewer, captured, monkeypatch):
    trace, run = captured
    sent = []
    monkeypatch.setattr(queueing, "send", lambda *args: sent.append(args))
    client.force_login(viewer)
    api_client.force_authenticate(viewer)
    with CaptureQueriesContext(connection) as queries:
        assert client.get(f"/traces/{trace.pk}/requests/").status_code == 200
        assert client.get(f"/traces/{trace.pk}/requests/req-1/").status_code == 200
        assert api_client.get(f"/api/traces/{trace.pk}/requests/").status_code == 202
    assert _writes(queries) == []
    assert not RequestSpan.objects.filter(trace=trace).exists()  # left for the task
    assert sent and sent[0] == (service.JOIN_TASK, trace.pk, service.JOIN_LIMIT_S)  # the join attaches them too
    attached = trace_tasks.attach_request_spans.apply().get()
    assert attached == RequestSpan.objects.filter(trace=trace).count() == 4 * len(run.requests)
    assert RequestSpan.objects.filter(trace__isnull=True).count() == 4  # the request of another hour
    service.join_requests(trace.pk)
    worst = api_client.get(f"/api/traces/{trace.pk}/requests/").data["worst"][0]["request_id"]
    with CaptureQueriesContext(connection) as queries:
        page = client.get(f"/traces/{trace.pk}/requests/{worst}/")
        assert api_client.get(f"/api/traces/{trace.pk}/requests/{worst}/").status_code == 200
    assert page.status_code == 200 and 'id="request-reason"' in page.content.decode()
    assert _writes(queries) == []


def test_the_join_of_a_capture_attaches_its_live_spans_itself(captured):
    trace, run = captured
    service.join_requests(trace.pk)
    doc = service.stored_join(trace)
    assert doc["requests"] == len(run.requests) and doc["stamp"].startswith(f"{4 * len(run.requests)}:")


def test_the_attaching_task_leaves_failed_and_long_ended_captures(captured):
    trace, _run = captured
    Trace.objects.filter(pk=trace.pk).update(status=TraceStatus.FAILED)
    assert attach_to_recent_captures() == 0
    Trace.objects.filter(pk=trace.pk).update(status=TraceStatus.READY)
    assert attach_to_recent_captures(now=trace.capture_ended_at + ATTACH_AFTER_CAPTURE + timedelta(seconds=1)) == 0
    assert attach_to_recent_captures(now=trace.capture_ended_at + ATTACH_AFTER_CAPTURE) > 0


def test_the_housekeeping_tasks_are_on_the_beat_schedule():
    assert "traces.tasks.attach_request_spans" in celery_app.tasks  # finalizes the app: its schedule is declared
    scheduled = {entry["task"]: entry for entry in celery_app.conf.beat_schedule.values()}
    for name in ("traces.tasks.attach_request_spans", "traces.tasks.prune_request_spans"):
        assert name in celery_app.tasks and name in scheduled
        assert scheduled[name]["options"]["expires"] < scheduled[name]["schedule"]
