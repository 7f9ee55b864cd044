"""Traces in an S3-compatible object store (TRACE_STORAGE=s3://…), against a real S3 API
server process (moto's) and the real boto3 client: large files go up in parts and stream
back, pages read their data from the store, a writer killed midway leaves no object, and a
store that is away fails the capture with a reason."""

import gzip
import hashlib
import random
import sys
import textwrap
import time
import tracemalloc
import urllib.request

import pytest
from django.core.files.storage import storages
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection

from tests.support.processes import ROOT, Service
from tests.support.trace_views import emulated_trace
from tests.support.traces import real_trace
from traces import writers
from traces.choices import TraceStatus
from traces.models import Trace
from traces.store.files import CHROME, TraceFiles

pytestmark = pytest.mark.django_db
MB = 1 << 20
PATTERN = bytes(range(251)) * (12 * MB // 251 + 2)  # byte i of a Generated stream is i % 251


class Generated:
    """A non-seekable stream of ``size`` deterministic bytes, as a request body is."""

    closed = False

    def seekable(self) -> bool:
        return False

    def __init__(self, size: int) -> None:
        self.size, self.sent, self.digest = size, 0, hashlib.sha256()
        self.largest_read = 0

    def read(self, n: int = -1) -> bytes:
        n = self.size - self.sent if n < 0 else min(n, self.size - self.sent)
        self.largest_read = max(self.largest_read, n)
        start = self.sent % 251
        block = PATTERN[start : start + n]
        self.sent += n
        self.digest.update(block)
        return block


def test_a_large_file_goes_up_in_parts_and_streams_back(object_store):
    """Past one part (5 MB here) a file is a multipart upload (its ETag says how many
    parts); memory holds a few parts, never the file; reading streams it back, and a ranged
    read fetches its slice."""
    files = TraceFiles(901)
    files.save_stream(files.name("warm-up"), Generated(6 * MB))  # the client's one-time setup
    size = 7 * 5 * MB + 123_457  # eight parts: seven whole, one short
    source = Generated(size)
    tracemalloc.start()
    files.save_stream(files.name("raw.json"), source)
    _now, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 5 * 5 * MB, f"{peak / MB:.1f} MB held to upload {size / MB:.1f} MB"
    files.storage.delete(files.name("warm-up"))
    head = object_store.client().head_object(Bucket=object_store.bucket, Key=f"{object_store.prefix}/901/raw.json")
    assert head["ContentLength"] == size and head["ETag"].strip('"').endswith("-8")
    digest = hashlib.sha256()
    with files.open("raw.json") as f:
        while block := f.read(MB):
            digest.update(block)
        f.seek(5 * MB + 16)
        assert f.read(300) == bytes((5 * MB + 16 + i) % 251 for i in range(300))
    assert digest.hexdigest() == source.digest.hexdigest()
    assert files.listdir() == ["raw.json"]
    files.delete_all()
    assert object_store.keys(f"{object_store.prefix}/901/") == []


def test_an_upload_is_analysed_and_every_page_is_served_from_the_store(object_store, api_client, viewer, operator, settings):
    """The raw trace and every result are objects; the pages' data come from them (the
    views through a bounded local copy, the least recently used evicted first) and a large
    download is a redirect to a presigned URL of the store."""
    a, b = emulated_trace(operator, seed=1), emulated_trace(operator, version="2.1", seed=2)
    keys = object_store.keys(f"{object_store.prefix}/{a.pk}/")
    assert f"{object_store.prefix}/{a.pk}/{CHROME}" in keys and any(k.endswith("/summary.json") for k in keys)
    assert not (settings.VAR_DIR / "traces").exists()
    api_client.force_authenticate(viewer)
    settings.TRACE_CACHE_MAX_MB = 0  # every new copy evicts the others
    for trace in (a, b):
        for url in (f"/api/traces/{trace.pk}/flame/", f"/api/traces/{trace.pk}/breakdown/?side=device",
                    f"/api/traces/{trace.pk}/instances/?side=device&op=bmm"):
            response = api_client.get(url)
            assert response.status_code == 200, (url, response.content[:300])
    copies = [p.name for p in (settings.VAR_DIR / "cache" / "trace-views").iterdir()]
    assert [c.split("-")[0] for c in copies] == [str(b.pk)], copies
    settings.TRACE_S3_REDIRECT_MB = 0
    response = api_client.get(f"/api/traces/{a.pk}/download/?format=chrome")
    assert response.status_code == 302 and response["Location"].startswith(object_store.endpoint)
    with urllib.request.urlopen(response["Location"], timeout=10) as answer:
        exported = gzip.decompress(answer.read())
        assert f"trace-{a.pk}-chrome.json.gz" in answer.headers["Content-Disposition"]
    assert b'"traceEvents"' in exported
    settings.TRACE_S3_REDIRECT_MB = 64
    small = api_client.get(f"/api/traces/{a.pk}/download/?format=chrome")
    assert small.status_code == 200 and gzip.decompress(b"".join(small.streaming_content)) == exported


def test_retention_and_the_budget_delete_objects(object_store, operator, settings, django_capture_on_commit_callbacks):
    path = real_trace("simple_add_kineto.json.gz")
    old = writers.accept_upload(SimpleUploadedFile(path.name, path.read_bytes()), operator)
    Trace.objects.filter(pk=old.pk).update(created_at=old.created_at.replace(year=2000))
    assert object_store.keys(f"{object_store.prefix}/{old.pk}/")
    with django_capture_on_commit_callbacks(execute=True):
        assert writers.prune_traces() == 1
    assert object_store.keys(f"{object_store.prefix}/{old.pk}/") == []


KILLED_WRITER = textwrap.dedent("""
    import os, sys, time, django
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dashboard.settings")
    django.setup()
    from traces.store.files import TraceFiles

    class Slow:
        sent, closed = 0, False
        def seekable(self):
            return False
        def read(self, n=-1):
            if self.sent >= 6 << 20:
                print("one part sent", flush=True)
                time.sleep(600)
            n = min(n if n > 0 else 1 << 20, 1 << 20)
            self.sent += n
            return b"x" * n

    files = TraceFiles(902)
    files.save_stream(files.name("raw.json"), Slow())
""")


def test_a_writer_killed_mid_upload_leaves_no_object(object_store, settings):
    """A multipart upload whose writer dies is never an object: the trace has no file."""
    env = {**_child_env(settings), **object_store.environment(object_store.prefix), "TRACE_S3_PART_MB": "5"}
    writer = Service("killed-writer", [sys.executable, "-c", KILLED_WRITER], env)
    try:
        writer.wait_for_line("one part sent", timeout=60)
        deadline = time.time() + 20
        while not object_store.open_multipart_uploads() and time.time() < deadline:
            time.sleep(0.1)
        assert object_store.open_multipart_uploads() == [f"{object_store.prefix}/902/raw.json"]
    finally:
        writer.proc.kill()
        writer.proc.wait()
    files = TraceFiles(902)
    assert not files.exists("raw.json") and files.listdir() == []
    assert object_store.keys(f"{object_store.prefix}/902/") == []
    # What the bucket's lifecycle rule would abort: aborted here, so that the next tests on
    # this server (whichever runs next, under xdist) find no multipart upload open.
    client = object_store.client()
    for upload in client.list_multipart_uploads(Bucket=object_store.bucket, Prefix=f"{object_store.prefix}/").get("Uploads", []):
        client.abort_multipart_upload(Bucket=object_store.bucket, Key=upload["Key"], UploadId=upload["UploadId"])


class Failing(Generated):
    """A stream that breaks after ``after`` bytes (a source that fails midway)."""

    def __init__(self, size: int, after: int) -> None:
        super().__init__(size)
        self.after = after

    def read(self, n: int = -1) -> bytes:
        if self.sent >= self.after:
            raise OSError("the source broke")
        return super().read(n)


@pytest.mark.parametrize("after", [MB, 6 * MB])  # within one PUT; past the first part of a multipart upload
def test_a_result_replaced_by_a_failing_writer_stays_whole_in_the_store(object_store, after):
    """A result is replaced as a whole object: a save that fails midway leaves the old one."""
    files = TraceFiles(903)
    files.save("summary.json", b'{"old": true}')
    with pytest.raises(OSError, match="broke"):
        files.save_stream(files.name("summary.json"), Failing(8 * MB, after))
    assert files.open("summary.json").read() == b'{"old": true}'
    assert files.listdir() == ["summary.json"] and object_store.open_multipart_uploads() == []
    files.save_stream(files.name("summary.json"), Generated(2 * MB))
    assert files.open("summary.json").read() == PATTERN[: 2 * MB]
    files.delete_all()


def test_a_capture_fails_with_a_reason_while_the_store_is_away(object_store, seeded_fleet, operator):
    """The store is away: the capture fails saying so, and the worker process goes on; once
    the store is back the next capture is stored."""
    device = seeded_fleet[0]
    first = writers.request_capture(device, operator, 1)
    object_store.stop()
    try:
        started = time.time()
        writers.run_capture(first.pk)
        assert time.time() - started < 60
    finally:
        object_store.start()
        object_store.client().create_bucket(Bucket=object_store.bucket)  # moto keeps buckets in memory
    first.refresh_from_db()
    assert first.status == TraceStatus.FAILED, first.status
    assert "the capture could not be stored" in first.error and "127.0.0.1" in first.error, first.error
    storages["traces"].exists("x")  # the client reconnects
    second = writers.request_capture(device, operator, 1)
    writers.run_capture(second.pk)
    second.refresh_from_db()
    assert second.status == TraceStatus.ANALYSING and TraceFiles(second.pk).exists(second.raw_file.split("/")[-1])


def _child_env(settings) -> dict:
    from tests.support.processes import child_env

    env = child_env()
    env["PYTHONPATH"] = str(ROOT)
    return env


@pytest.fixture(scope="module")
def large_trace(tmp_path_factory) -> bytes:
    """A Kineto trace of about 12 MB: three 5 MB parts in the store."""
    from tests.support.tracegen import write_kineto_trace

    path = tmp_path_factory.mktemp("large") / "rank0.trace.json"
    write_kineto_trace(path, 45_000, seed=3)
    assert path.stat().st_size > 10 * MB, path.stat().st_size
    return path.read_bytes()


def send_resumable(api_client, data: bytes, chunk: int) -> str:
    upload = api_client.post("/api/uploads/", {"filename": "big.json", "size": len(data)}, format="json").data
    for offset in range(0, len(data), chunk):
        response = api_client.put(f"/api/uploads/{upload['id']}/?offset={offset}", data=data[offset:offset + chunk],
                                  content_type="application/octet-stream")
        assert response.status_code == 200, response.content
    assert api_client.post(f"/api/uploads/{upload['id']}/finish/", {"size": len(data)}, format="json").status_code == 200
    return upload["id"]


def test_large_uploads_go_to_the_store_in_parts_and_are_analysed(object_store, api_client, operator, large_trace):
    """Resumable uploads (their chunks are parts in the store until the trace takes them)
    and a multipart POST: each raw trace is one multipart object equal to the file, no part
    is left behind, and the worker analyses it from the store. Chunks of 7 MB become the
    trace's parts inside the store (two parts); 2 MB chunks, under S3's 5 MB floor, are
    streamed through into 5 MB parts (three). The POST's file goes to the store while the
    body is read, where its trace keeps it (three parts, no copy: on PostgreSQL, which
    reserves the trace's id first)."""
    api_client.force_authenticate(operator)
    small_chunks = send_resumable(api_client, large_trace, 2 * MB)
    assert len(object_store.keys(f"{object_store.prefix}/uploads/")) == -(-len(large_trace) // (2 * MB))
    large_chunks = send_resumable(api_client, large_trace, 7 * MB)
    made = [api_client.post("/api/traces/", {"upload": upload}, format="json") for upload in (small_chunks, large_chunks)]
    made.append(api_client.post("/api/traces/", {"file": SimpleUploadedFile("big.json", large_trace)}, format="multipart"))
    assert [r.status_code for r in made] == [201, 201, 201], [r.content for r in made]
    assert object_store.keys(f"{object_store.prefix}/uploads/") == []
    assert object_store.keys(f"{object_store.prefix}/incoming/") == [] and object_store.open_multipart_uploads() == []
    # Where no trace id can be reserved (SQLite), the POST's file waits in incoming/ and is
    # copied inside the store when its trace is made: one part-copy, not three parts.
    posted = "-3" if connection.vendor == "postgresql" else "-1"
    for response, parts in zip(made, ("-3", "-2", posted), strict=True):
        trace = Trace.objects.get(pk=response.data["id"])
        head = object_store.client().head_object(Bucket=object_store.bucket, Key=f"{object_store.prefix}/{trace.raw_file}")
        assert head["ContentLength"] == len(large_trace) and head["ETag"].strip('"').endswith(parts), head["ETag"]
        with TraceFiles(trace.pk).storage.open(trace.raw_file, "rb") as f:
            assert hashlib.sha256(f.read()).digest() == hashlib.sha256(large_trace).digest()
        writers.analyse(trace.pk)
        trace.refresh_from_db()
        assert trace.status == TraceStatus.READY and trace.events > 20_000, trace.error


def test_trace_storage_reads_an_s3_url_and_refuses_another():
    from django.core.exceptions import ImproperlyConfigured

    from dashboard.settings import trace_storage

    config = trace_storage("s3://fleet-traces/prod/eu/")
    assert config["BACKEND"] == "traces.store.object_store.TraceObjectStorage"
    assert config["OPTIONS"]["bucket_name"] == "fleet-traces" and config["OPTIONS"]["location"] == "prod/eu"
    assert trace_storage("")["BACKEND"] == "django.core.files.storage.FileSystemStorage"
    for bad in ("gs://bucket", "s3://", "fleet-traces"):
        with pytest.raises(ImproperlyConfigured, match="s3://bucket"):
            trace_storage(bad)


def test_a_part_writer_sends_full_parts_as_they_fill_and_an_abort_leaves_nothing(object_store):
    from django.core.files.storage import storages

    store, data = storages["traces"], random.Random(3).randbytes(12 * MB + 123)
    writer = store.writer("w/whole.bin")
    for start in range(0, len(data), MB):
        writer.write(data[start:start + MB])
        if start >= 6 * MB:  # the first 5 MB part went up while the rest was still coming
            assert object_store.open_multipart_uploads() == [f"{object_store.prefix}/w/whole.bin"]
    writer.close()
    head = object_store.client().head_object(Bucket=object_store.bucket, Key=f"{object_store.prefix}/w/whole.bin")
    assert head["ETag"].strip('"').endswith("-3")
    with store.open("w/whole.bin", "rb") as f:
        assert f.read() == data
        f.seek(7 * MB)
        assert f.read(10) == data[7 * MB:7 * MB + 10]
    small = store.writer("w/small.bin")
    small.write(b"tiny")
    small.close()
    assert store.open("w/small.bin", "rb").read() == b"tiny"
    dropped = store.writer("w/dropped.bin")
    dropped.write(data[:11 * MB])
    dropped.abort()
    assert object_store.keys(f"{object_store.prefix}/w/") == [f"{object_store.prefix}/w/{n}" for n in ("small.bin", "whole.bin")]
    assert object_store.open_multipart_uploads() == []


def test_a_post_past_the_size_limit_leaves_nothing_in_the_store(object_store, api_client, operator, settings):
    settings.TRACE_UPLOAD_MAX_MB = 6
    api_client.force_authenticate(operator)
    body = random.Random(4).randbytes(8 * MB)
    response = api_client.post("/api/traces/", {"file": SimpleUploadedFile("big.json", body)}, format="multipart")
    assert response.status_code == 413, response.content
    assert object_store.keys(f"{object_store.prefix}/") == [] and object_store.open_multipart_uploads() == []


def test_a_file_a_post_left_in_incoming_is_pruned_once_idle(object_store, settings):
    """A web process stopped between storing a POST's file and its request's end leaves it in
    incoming/: the idle-upload pruning deletes it once it is as old as an idle upload."""
    from datetime import timedelta

    from django.utils import timezone

    from traces.uploads import sessions as upload_sessions

    left = storages["traces"].writer("incoming/0123abcd/left.json")
    left.write(b"{}")
    left.close()
    assert upload_sessions.prune_idle() == 0
    later = timezone.now() + timedelta(hours=settings.TRACE_UPLOAD_IDLE_HOURS, minutes=5)
    assert upload_sessions.prune_idle(later) == 1
    assert object_store.keys(f"{object_store.prefix}/incoming/") == []


def test_posted_files_that_make_no_trace_of_their_reserved_id_leave_nothing_behind(object_store, api_client, operator):
    """A job's files become traces of their own ids (copied inside the store from where the
    handler put them), and a file refused for its content is deleted: in the store, only
    the job's rank traces' files, no multipart upload left open."""
    from emulator.workloads.tracing import capture
    from traces.atrace import chrome_trace_bytes

    api_client.force_authenticate(operator)
    files = [SimpleUploadedFile(f"rank{r}.json", chrome_trace_bytes(capture("gpu", 0.03, sw_version="2.0", seed=r)))
             for r in range(2)]
    made = api_client.post("/api/jobs/", {"files": files}, format="multipart")
    assert made.status_code == 202, made.content
    bad = api_client.post("/api/traces/", {"file": SimpleUploadedFile("bad.json", b'{"traceEvents": [{"ph": "X",')},
                          format="multipart")
    assert bad.status_code == 400, bad.content
    ranks = Trace.objects.filter(params__job=made.data["id"])
    assert sorted(object_store.keys(f"{object_store.prefix}/")) == sorted(
        f"{object_store.prefix}/{t.raw_file}" for t in ranks)
    assert object_store.open_multipart_uploads() == []


def test_one_s3_connection_serves_every_thread(object_store):
    """Django runs each request's view in a thread of its own: they share the storage's one
    S3 resource (S3Storage built one, ~12 MB, per thread), and a request body's writer goes
    up in parts of S3's 5 MB floor whatever TRACE_S3_PART_MB says."""
    import threading

    from traces.store.object_store import MIN_PART

    store = storages["traces"]
    store.part_bytes = 8 * MB
    seen = []
    threads = [threading.Thread(target=lambda: seen.append(store.connection)) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(seen) == 3 and all(c is store.connection for c in seen)
    assert store.writer("w/x.bin").part == MIN_PART
    assert store.writer("w/y.bin", max_bytes=60_000 * MB).part == 6 * MB  # 10,000 parts at most
