"""The jobs API, pages and websocket: who may do what, bad requests, and what they show."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async

from tests.scenarios.test_jobs import SHARED, _analyse
from tests.support.jobs import running_job, same_software
from tests.support.traces import real_trace
from tests.support.websockets import closed_after_accept, connect, session_headers
from traces import events
from traces.choices import JobStatus, RankStatus
from traces.jobs import capture as job_capture
from traces.models import Job, Trace


@pytest.fixture
def ready_job(gpu_fleet, operator, trace_storage):
    devices = same_software(gpu_fleet, 4)
    running_job(devices, "overheat", devices[1])
    job = job_capture.request_job_capture(operator, devices, 1.5, name="bert-ddp")
    job_capture.run_job_capture(job.pk)
    return _analyse(Job.objects.get(pk=job.pk)), devices[1]


@pytest.mark.django_db
def test_capture_api_gives_202_and_a_job_with_one_rank_per_device(api_client, operator, gpu_fleet, trace_storage):
    api_client.force_authenticate(operator)
    devices = same_software(gpu_fleet, 3)
    response = api_client.post("/api/jobs/capture/", {"devices": [d.pk for d in devices], "duration_s": 2}, format="json")
    assert response.status_code == 202, response.content
    job = Job.objects.get(pk=response.data["id"])
    assert response.data["url"] == f"/traces/jobs/{job.pk}/" and job.status == JobStatus.QUEUED
    assert [(r.rank, r.device_id) for r in job.ranks.all()] == [(k, d.pk) for k, d in enumerate(devices)]
    assert Trace.objects.filter(params__job=job.pk).count() == 3
    by_filter = api_client.post("/api/jobs/capture/", {"host": "host-01", "type": "gpu", "duration_s": 2}, format="json")
    # host-01's devices now hold the first job's captures, except the one it did not take.
    assert by_filter.status_code == 202, by_filter.content
    second = Job.objects.get(pk=by_filter.data["id"])
    assert {r.status for r in second.ranks.all()} == {RankStatus.BUSY, RankStatus.QUEUED}


@pytest.mark.django_db
@pytest.mark.parametrize(("body", "field", "message"), [
    ({}, "detail", "name the job's devices"),
    ({"devices": "all"}, "devices", ""),
    ({"devices": [999999]}, "detail", "no device with id 999999"),
    ({"type": "gpu", "duration_s": 600}, "detail", "duration_s must be between"),
    ({"type": "gpu", "parallelism": "pipeline"}, "parallelism", ""),
    ({"host": "host-00"}, "detail", "one device type"),
])
def test_bad_capture_requests_are_400_with_the_reason_and_write_nothing(api_client, operator, seeded_fleet, body, field, message):
    api_client.force_authenticate(operator)
    response = api_client.post("/api/jobs/capture/", body, format="json")
    assert response.status_code == 400, response.content
    assert field in response.data and message in str(response.data[field])
    assert not Job.objects.exists() and not Trace.objects.exists()


@pytest.mark.django_db
def test_only_operators_capture_and_upload_jobs(api_client, viewer, seeded_fleet):
    gpu = [d.pk for d in seeded_fleet if d.device_type == "gpu"]
    assert api_client.post("/api/jobs/capture/", {"devices": gpu}, format="json").status_code in (401, 403)
    api_client.force_authenticate(viewer)
    assert api_client.post("/api/jobs/capture/", {"devices": gpu}, format="json").status_code == 403
    path = real_trace(SHARED[0])
    with path.open("rb") as f:
        assert api_client.post("/api/jobs/", {"files": [f]}, format="multipart").status_code == 403
    assert api_client.get("/api/jobs/").status_code == 200
    assert not Job.objects.exists()


@pytest.mark.django_db
def test_upload_api_takes_one_file_per_rank_and_names_a_bad_one(api_client, operator, trace_storage):
    api_client.force_authenticate(operator)
    paths = [real_trace(name) for name in SHARED]
    handles = [p.open("rb") for p in paths]
    try:
        response = api_client.post("/api/jobs/", {"files": handles, "name": "shared"}, format="multipart")
    finally:
        for h in handles:
            h.close()
    assert response.status_code == 202, response.content
    job = Job.objects.get(pk=response.data["id"])
    assert job.name == "shared" and job.world_size == 3 and job.source == "upload"
    import io

    bad = io.BytesIO(b'{"traceEvents": [{"ph": "X", "ts": 1,')
    bad.name = "rank7.json"
    response = api_client.post("/api/jobs/", {"files": [bad]}, format="multipart")
    assert response.status_code == 400 and "rank7.json" in response.data["detail"]
    assert api_client.post("/api/jobs/", {}, format="multipart").status_code == 400
    assert Job.objects.count() == 1


@pytest.mark.django_db
@pytest.mark.slow  # over 1.5 s on 2 cores: in make test, out of make test-fast
def test_the_job_page_names_the_straggler_its_cost_and_why(client, viewer, ready_job):
    job, victim = ready_job
    client.force_login(viewer)
    page = client.get(f"/traces/jobs/{job.pk}/").content.decode()
    assert f'href="/devices/{victim.pk}/"' in page and "Straggler: rank 1" in page
    assert 'id="straggler-reasons"' in page and "Throttled" in page
    assert page.count('<tr data-rank="') == 4 and 'class="straggler"' in page
    listing = client.get("/traces/jobs/").content.decode()
    assert "bert-ddp" in listing and victim.serial in listing
    device_page = client.get(f"/devices/{victim.pk}/").content.decode()
    assert 'id="device-straggler-jobs"' in device_page and f"/traces/jobs/{job.pk}/" in device_page
    other = client.get(f"/devices/{job.ranks.get(rank=0).device_id}/").content.decode()
    assert "It has not held up any job" in other


@pytest.mark.django_db
@pytest.mark.slow  # over 1.5 s on 2 cores: in make test, out of make test-fast
def test_job_results_api(api_client, viewer, ready_job):
    job, victim = ready_job
    api_client.force_authenticate(viewer)
    detail = api_client.get(f"/api/jobs/{job.pk}/").data
    assert detail["straggler_device"] == victim.pk and len(detail["ranks"]) == 4
    assert any(text.startswith("Throttled") for text in detail["ranks"][1]["reasons"])
    report = api_client.get(f"/api/jobs/{job.pk}/report/").data
    assert report["straggler"]["device"] == victim.serial
    window = api_client.get(f"/api/jobs/{job.pk}/timeline/?first=4&limit=6").data
    assert window["first"] == 4 and window["count"] == 6 and window["path"]
    assert api_client.get(f"/api/jobs/{job.pk}/timeline/?first=x").status_code == 400
    assert api_client.get(f"/api/jobs/{job.pk}/timeline/?limit=100000").status_code == 400
    Job.objects.filter(pk=job.pk).update(status=JobStatus.COMBINING)
    assert api_client.get(f"/api/jobs/{job.pk}/report/").status_code == 409


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("close_thread_connections")
async def test_job_socket_forwards_rank_progress_to_viewers_only(client, viewer, outsider, clean_redis):
    job = await sync_to_async(Job.objects.create)(name="j", source="capture", world_size=2)
    communicator, connected, _ = await connect(f"/ws/jobs/{job.pk}/", await session_headers(client, viewer))
    assert connected
    rows = [{"rank": 0, "status": "capturing", "progress": 0.5, "events": 100, "error": ""}]
    await sync_to_async(events.job_ranks)(job.pk, 0.5, rows)
    message = await communicator.receive_json_from(timeout=5)
    assert message == {"type": "job.ranks", "job": job.pk, "progress": 0.5, "ranks": rows}
    await sync_to_async(events.job_changed)(job.pk, "analysing", 0.0, "", url="/x/")
    assert (await communicator.receive_json_from(timeout=5))["status"] == "analysing"
    await communicator.disconnect()
    refused, connected, _ = await connect(f"/ws/jobs/{job.pk}/", await session_headers(client, outsider))
    assert await closed_after_accept(refused, connected) == 4403
    missing, connected, _ = await connect(f"/ws/jobs/{job.pk + 99}/", await session_headers(client, viewer))
    assert await closed_after_accept(missing, connected) == 4404


@pytest.mark.django_db
def test_a_job_opened_by_world_size_takes_its_ranks_one_request_each(api_client, operator, viewer, trace_storage,
                                                                       monkeypatch, django_capture_on_commit_callbacks):
    from django.contrib.auth.models import Group, User

    from traces import queueing

    monkeypatch.setattr(queueing, "send", lambda *args, **kwargs: None)  # the broker is not what is tested
    api_client.force_authenticate(operator)
    opened = api_client.post("/api/jobs/", {"world_size": 2, "name": "two hosts", "wait_s": 600}, format="json")
    assert opened.status_code == 202, opened.content
    job_id, ranks_url = opened.data["id"], opened.data["ranks_url"]
    assert ranks_url == f"/api/jobs/{job_id}/ranks/" and opened.data["status"] == JobStatus.QUEUED
    with real_trace(SHARED[1]).open("rb") as f, django_capture_on_commit_callbacks(execute=True):
        sent = api_client.post(ranks_url, {"file": f}, format="multipart")
    assert sent.status_code == 202, sent.content
    assert sent.data["rank"] == 1 and sent.data["ranks_in"] == 1 and sent.data["world_size"] == 2
    assert Job.objects.get(pk=job_id).status == JobStatus.ANALYSING
    with real_trace(SHARED[1]).open("rb") as f:
        again = api_client.post(ranks_url, {"file": f}, format="multipart")
    assert again.status_code == 409 and "already has rank 1" in again.data["detail"]
    with real_trace(SHARED[0]).open("rb") as f:
        outside = api_client.post(ranks_url, {"file": f, "rank": 7}, format="multipart")
    assert outside.status_code == 400 and "outside the job's 2 ranks" in outside.data["detail"]
    assert api_client.post(ranks_url, {}, format="multipart").status_code == 400

    # Only who opened the job sends its ranks; viewers send none.
    other = User.objects.create_user("olga", password="x")
    other.groups.add(*Group.objects.filter(name__in=["viewers", "operators"]))
    for user, code in ((other, 403), (viewer, 403)):
        api_client.force_authenticate(user)
        with real_trace(SHARED[0]).open("rb") as f:
            assert api_client.post(ranks_url, {"file": f}, format="multipart").status_code == code
    assert Trace.objects.filter(params__job=job_id).count() == 1


@pytest.mark.django_db
@pytest.mark.parametrize(("body", "field", "message"), [
    ({"world_size": 0}, "world_size", ""),
    ({"world_size": 100000}, "world_size", "at most"),
    ({"world_size": 2, "wait_s": 1}, "wait_s", ""),
    ({"wait_s": 60}, "wait_s", "goes with world_size"),
])
def test_bad_open_job_requests_are_400_and_write_nothing(api_client, operator, body, field, message):
    api_client.force_authenticate(operator)
    response = api_client.post("/api/jobs/", body, format="json")
    assert response.status_code == 400, response.content
    assert field in response.data and message in str(response.data[field])
    assert not Job.objects.exists()
