"""The resumable upload API (/api/uploads/): chunks at the offset stored so far, a size
checked at the finish, then a trace or a job made from it (issue 25, point 1)."""

import hashlib
from pathlib import Path

import pytest

from tests.support.traces import files_in, real_trace
from traces import writers
from traces.choices import TraceStatus
from traces.models import Job, Trace, Upload

pytestmark = pytest.mark.django_db


def start(client, name: str, size: int):
    return client.post("/api/uploads/", {"filename": name, "size": size}, format="json")


def put(client, upload_id, offset: int, data: bytes):
    return client.put(f"/api/uploads/{upload_id}/?offset={offset}", data=data, content_type="application/octet-stream")


def send_all(client, name: str, data: bytes, chunk: int = 100_000) -> str:
    upload = start(client, name, len(data)).data
    for offset in range(0, len(data), chunk):
        response = put(client, upload["id"], offset, data[offset:offset + chunk])
        assert response.status_code == 200, response.content
        assert response.data["received"] == min(offset + chunk, len(data))
    finished = client.post(f"/api/uploads/{upload['id']}/finish/", {"size": len(data)}, format="json")
    assert finished.status_code == 200 and finished.data["finished"], finished.content
    return upload["id"]


def test_chunks_make_a_trace_equal_to_the_file_and_leave_no_parts(api_client, operator, trace_storage):
    path = real_trace("simple_add_kineto.json.gz")
    data = path.read_bytes()
    api_client.force_authenticate(operator)
    upload_id = send_all(api_client, path.name, data)
    response = api_client.post("/api/traces/", {"upload": upload_id, "sw_version": "2.7"}, format="json")
    assert response.status_code == 201, response.content
    trace = Trace.objects.get(pk=response.data["id"])
    assert trace.name == path.name and trace.sw_version == "2.7" and trace.raw_bytes == len(data)
    with trace_storage.open(trace.raw_file, "rb") as stored:
        assert hashlib.sha256(stored.read()).digest() == hashlib.sha256(data).digest()
    assert not Upload.objects.exists()
    assert not [p for p in files_in(Path(trace_storage.location)) if "uploads" in p.parts]
    writers.analyse(trace.pk)
    trace.refresh_from_db()
    assert trace.status == TraceStatus.READY, trace.error


def test_a_chunk_off_the_stored_offset_or_past_the_size_is_400_and_changes_nothing(api_client, operator, trace_storage):
    api_client.force_authenticate(operator)
    upload = start(api_client, "t.json", 300).data
    assert put(api_client, upload["id"], 0, b"{" + b" " * 99).status_code == 200
    for offset, data, words in [(50, b"x" * 100, "overlaps"), (150, b"x" * 100, "gap"), (100, b"x" * 250, "past the declared size"),
                                ("x", b"x", "offset must be")]:
        response = put(api_client, upload["id"], offset, data)
        assert response.status_code == 400, (offset, response.content)
        assert words in response.data["detail"], response.data
    state = api_client.get(f"/api/uploads/{upload['id']}/").data
    assert state["received"] == 100 and not state["finished"]
    assert len(files_in(Path(trace_storage.location))) == 1


def test_a_finish_with_a_wrong_size_or_missing_bytes_is_400(api_client, operator, trace_storage):
    api_client.force_authenticate(operator)
    upload = start(api_client, "t.json", 200).data
    put(api_client, upload["id"], 0, b"[" + b" " * 99)
    finish = f"/api/uploads/{upload['id']}/finish/"
    response = api_client.post(finish, {"size": 100}, format="json")
    assert response.status_code == 400 and "not the 200 bytes" in response.data["detail"]
    response = api_client.post(finish, {"size": 200}, format="json")
    assert response.status_code == 400 and "from offset 100" in response.data["detail"]
    response = api_client.post("/api/traces/", {"upload": upload["id"]}, format="json")
    assert response.status_code == 400 and "not finished" in response.data["detail"]
    assert not Trace.objects.exists() and not Upload.objects.get().finished


def test_only_operators_upload_and_only_their_own_uploads(api_client, viewer, operator, trace_storage):
    assert start(api_client, "t.json", 10).status_code == 401
    api_client.force_authenticate(viewer)
    response = start(api_client, "t.json", 10)
    assert response.status_code == 403 and "upload trace" in response.data["detail"]
    api_client.force_authenticate(operator)
    upload = start(api_client, "t.json", 10).data
    api_client.force_authenticate(viewer)
    assert put(api_client, upload["id"], 0, b"x" * 10).status_code == 403
    from django.contrib.auth.models import Group, User

    other = User.objects.create(username="olga")
    other.groups.add(Group.objects.get(name="operators"))
    api_client.force_authenticate(other)
    assert put(api_client, upload["id"], 0, b"x" * 10).status_code == 404
    assert api_client.post("/api/traces/", {"upload": upload["id"]}, format="json").status_code == 400
    api_client.force_authenticate(None)
    assert api_client.get(f"/api/uploads/{upload['id']}/").status_code == 401
    assert Upload.objects.get().received == 0


def test_an_upload_that_started_is_not_refused_at_its_end_when_the_budget_filled_meanwhile(
        api_client, operator, trace_storage, settings):
    """Its room was taken at the start; the trace takes the upload's place (it was refused
    507 while other uploads became traces: both counted for a moment)."""
    path = real_trace("simple_add_kineto.json.gz")
    data = path.read_bytes()
    settings.TRACE_STORAGE_MAX_GB = len(data) * 1.5 / (1 << 30)
    api_client.force_authenticate(operator)
    upload_id = send_all(api_client, path.name, data)
    assert start(api_client, "other.json", len(data)).status_code == 507  # the room is taken
    response = api_client.post("/api/traces/", {"upload": upload_id}, format="json")
    assert response.status_code == 201, response.content
    assert start(api_client, "other.json", len(data)).status_code == 507  # by the trace now


def test_too_large_or_over_the_budget_is_refused_at_the_start(api_client, operator, trace_storage, settings):
    api_client.force_authenticate(operator)
    settings.TRACE_UPLOAD_MAX_MB = 1
    response = start(api_client, "big.json", (1 << 20) + 1)
    assert response.status_code == 413 and "TRACE_UPLOAD_MAX_MB" in response.data["detail"]
    settings.TRACE_UPLOAD_MAX_MB = 100
    settings.TRACE_STORAGE_MAX_GB = 0.01  # 10.7 MB, and open uploads count against it
    assert start(api_client, "a.json", 6 << 20).status_code == 201
    response = start(api_client, "b.json", 6 << 20)
    assert response.status_code == 507 and "TRACE_STORAGE_MAX_GB" in response.data["detail"]
    assert Upload.objects.count() == 1


def test_a_job_is_made_from_finished_uploads(api_client, operator, trace_storage):
    from tests.scenarios.test_jobs import SHARED

    api_client.force_authenticate(operator)
    ids = [send_all(api_client, name, real_trace(name).read_bytes(), chunk=1 << 20) for name in SHARED]
    response = api_client.post("/api/jobs/", {"uploads": ids, "name": "shared"}, format="json")
    assert response.status_code == 202, response.content
    job = Job.objects.get(pk=response.data["id"])
    assert job.world_size == len(SHARED) and job.name == "shared"
    assert not Upload.objects.exists()


def test_a_cancelled_upload_leaves_nothing(api_client, operator, trace_storage):
    api_client.force_authenticate(operator)
    upload = start(api_client, "t.json", 200).data
    put(api_client, upload["id"], 0, b"[" + b" " * 99)
    assert api_client.delete(f"/api/uploads/{upload['id']}/").status_code == 204
    assert not Upload.objects.exists() and files_in(Path(trace_storage.location)) == []


def test_uploads_left_idle_are_pruned_with_their_parts(api_client, operator, trace_storage, settings):
    from datetime import timedelta

    from django.utils import timezone

    from traces.tasks import prune_traces

    api_client.force_authenticate(operator)
    idle = start(api_client, "idle.json", 200).data
    put(api_client, idle["id"], 0, b"[" + b" " * 99)
    fresh = start(api_client, "fresh.json", 200).data
    Upload.objects.filter(pk=idle["id"]).update(
        touched_at=timezone.now() - timedelta(hours=settings.TRACE_UPLOAD_IDLE_HOURS, minutes=1))
    assert prune_traces() == 1
    assert list(Upload.objects.values_list("filename", flat=True)) == ["fresh.json"]
    assert files_in(Path(trace_storage.location)) == []
    # Parts whose row is gone (the process stopped between the trace and their deletion).
    put(api_client, fresh["id"], 0, b"[" + b" " * 99)
    Upload.objects.all().delete()
    assert prune_traces() == 1
    assert files_in(Path(trace_storage.location)) == []
