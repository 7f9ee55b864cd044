"""An upload streams to storage: the web process never holds the file.

The request's body is served from a file on disk, as a server would stream it, through
Django's real handler; Python's allocations are traced on the server side only.
"""

from __future__ import annotations

import hashlib
import tracemalloc

import pytest
from django.conf import settings
from django.core.files.storage import storages
from django.test import Client
from django.test.client import ClientHandler

from tests.support.tracegen import write_kineto_trace
from traces.models import Trace

pytestmark = pytest.mark.django_db

BOUNDARY = "asicmon-upload-boundary"


def _multipart_body(source, body) -> None:
    """The multipart/form-data body of an upload of ``source``, written a chunk at a time."""
    with body.open("wb") as out, source.open("rb") as f:
        out.write(f"--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{source.name}\"\r\n"
                  "Content-Type: application/json\r\n\r\n".encode())
        while chunk := f.read(1 << 20):
            out.write(chunk)
        out.write(f"\r\n--{BOUNDARY}--\r\n".encode())


def _sha(path_or_file) -> str:
    digest = hashlib.sha256()
    while chunk := path_or_file.read(1 << 20):
        digest.update(chunk)
    return digest.hexdigest()


@pytest.mark.slow  # over 1.5 s on 2 cores: in make test, out of make test-fast
def test_a_large_upload_is_streamed_to_storage_in_bounded_memory(operator, trace_storage, tmp_path):
    source = tmp_path / "large.json"
    write_kineto_trace(source, 150_000, seed=7)
    size = source.stat().st_size
    body = tmp_path / "body"
    _multipart_body(source, body)
    client = Client()
    client.force_login(operator)
    handler = ClientHandler(enforce_csrf_checks=False)
    assert client.get("/api/traces/").status_code == 200  # modules and URLs loaded before tracing
    with body.open("rb") as stream:
        environ = {
            **client._base_environ(),
            "REQUEST_METHOD": "POST",
            "PATH_INFO": "/api/traces/",
            "CONTENT_TYPE": f"multipart/form-data; boundary={BOUNDARY}",
            "CONTENT_LENGTH": str(body.stat().st_size),
            "HTTP_COOKIE": f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}",
            "wsgi.input": stream,
        }
        tracemalloc.start()
        try:
            start, _ = tracemalloc.get_traced_memory()
            response = handler(environ)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert response.status_code == 201, response.content[:500]
    assert size > 40e6
    # The body goes to a temporary file 64 kB at a time, the check scans the events a few
    # MB at a time, and storage copies the file in chunks: the request's allocations stay
    # a small bound (not a share of the file).
    assert peak - start < 12e6, (peak - start, size)
    trace = Trace.objects.get()
    with storages["traces"].open(trace.raw_file.name if hasattr(trace.raw_file, "name") else trace.raw_file, "rb") as stored, source.open("rb") as original:
        assert _sha(stored) == _sha(original)
    assert trace.raw_bytes == size
