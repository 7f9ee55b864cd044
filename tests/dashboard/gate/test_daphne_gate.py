"""Uploads are refused from their headers, before the body is stored (issue 25, point 1).

A real Daphne serves the test's database; a raw socket sends the headers of a 2 GB upload and
streams its body as fast as it can while another thread waits for the answer. Meanwhile the
test watches every file the server holds open or has written under its temporary folder and
its trace storage (Daphne's temporary files are unlinked when made, so they are found through
/proc/<pid>/fd). Before the gate, Daphne stored the whole body and the answer (401) came only
after it: the test saw no answer within its second and hundreds of MB written.
"""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time
from pathlib import Path

import pytest
from django.conf import settings
from django.test import Client
from rest_framework.authtoken.models import Token

from tests.support.otlp import protobuf_body, sdk_spans
from tests.support.processes import child_env, start_web
from traces.models import Trace

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

TWO_GB = 2 << 30
ROUTES = ["/api/traces/", "/api/jobs/", "/api/%74races/"]  # the last: the first, quoted


@pytest.fixture
def daphne(trace_storage, tmp_path):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    service, url = start_web(child_env(TRACE_STORAGE_DIR=trace_storage.location, TMPDIR=tmp))
    yield service, int(url.rsplit(":", 1)[1]), [tmp, Path(trace_storage.location)]
    service.stop()


def _bytes_under(pid: int, folders: list[Path]) -> int:
    """Bytes in files under ``folders``: those with a name, and those the process holds open
    (an unlinked temporary file has no name)."""
    roots = [str(f) for f in folders]
    total = sum(p.stat().st_size for f in folders for p in f.rglob("*") if p.is_file())
    fd_dir = Path(f"/proc/{pid}/fd")
    for fd in fd_dir.iterdir() if fd_dir.exists() else []:
        try:
            target = str(fd.readlink())
            if any(target.startswith(root) for root in roots) and "(deleted)" in target:
                total += fd.stat().st_size
        except OSError:
            continue
    return total


def raw_upload(port: int, path: str, headers: dict, *, declared: int | None = TWO_GB, send_at_most: int = 400 << 20,
               watch=None, wait_s: float = 5.0, method: str = "POST") -> dict:
    """POST ``declared`` bytes (headers first, then zeros as fast as the server takes them);
    the answer's status and body, seconds from the headers to the answer, bytes sent, and
    the most bytes ``watch()`` saw while it lasted."""
    sock = socket.create_connection(("127.0.0.1", port))
    lines = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1", "Content-Type: multipart/form-data; boundary=x"]
    if declared is not None:
        lines.append(f"Content-Length: {declared}")
    lines += [f"{k}: {v}" for k, v in headers.items()]
    sent = {"bytes": 0, "stop": False}
    seen = {"max": 0}

    def send_body():
        chunk = b"\0" * (1 << 20)
        try:
            while not sent["stop"] and sent["bytes"] < min(declared or send_at_most, send_at_most):
                sock.sendall(chunk)
                sent["bytes"] += len(chunk)
        except OSError:
            pass

    def watching():
        while not sent["stop"] and watch is not None:
            seen["max"] = max(seen["max"], watch())
            time.sleep(0.02)

    sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
    started = time.monotonic()
    threads = [threading.Thread(target=send_body, daemon=True), threading.Thread(target=watching, daemon=True)]
    for t in threads:
        t.start()
    sock.settimeout(wait_s)
    status, body = _read_answer(sock)
    seconds = time.monotonic() - started
    time.sleep(0.3)  # what the server still writes after its answer counts too
    sent["stop"] = True
    for t in threads:
        t.join(timeout=5)
    sock.close()
    return {"status": status, "body": body, "seconds": seconds, "sent": sent["bytes"], "written": seen["max"]}


def _read_answer(sock) -> tuple[int | None, bytes]:
    """The status and body of the server's answer (None: no answer before the timeout)."""
    answer = b""
    try:
        while b"\r\n\r\n" not in answer and (data := sock.recv(65536)):
            answer += data
    except (TimeoutError, ConnectionResetError):
        pass
    head, _, body = answer.partition(b"\r\n\r\n")
    if not head:
        return None, b""
    lines = head.split(b"\r\n")
    length = next((int(line.split(b":")[1]) for line in lines if line.lower().startswith(b"content-length:")), 0)
    try:
        while len(body) < length and (data := sock.recv(65536)):
            body += data
    except OSError:
        pass
    return int(lines[0].split(b" ")[1]), body


def _watch(service, folders):
    """Bytes written under ``folders`` since now."""
    before = _bytes_under(service.proc.pid, folders)
    return lambda: _bytes_under(service.proc.pid, folders) - before


def _session_cookie(user) -> str:
    client = Client()
    client.force_login(user)
    return f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}"


@pytest.mark.parametrize("path", ROUTES)
def test_an_anonymous_2gb_upload_is_refused_at_once_and_nothing_is_written(daphne, path):
    service, port, folders = daphne
    result = raw_upload(port, path, {}, watch=_watch(service, folders))
    assert result["status"] == 401, result
    assert json.loads(result["body"])["detail"] == "Authentication credentials were not provided."
    assert result["seconds"] <= 1.0, result
    assert result["written"] == 0, result
    assert _bytes_under(service.proc.pid, folders) == 0
    print(f"\n{path}: anonymous 2 GB POST answered {result['status']} in {result['seconds'] * 1000:.0f} ms, "
          f"{result['written']} bytes written, {result['sent'] >> 20} MB sent before the close")


def test_who_and_how_large_are_decided_from_the_headers(daphne, viewer, operator, settings):
    service, port, folders = daphne
    watch = _watch(service, folders)
    token = Token.objects.create(user=operator).key
    cases = [
        ({"Authorization": "Token not-a-token"}, TWO_GB, 401, "Invalid token."),
        ({"Cookie": _session_cookie(viewer)}, TWO_GB, 403, "'upload trace' permission"),
        ({"Cookie": _session_cookie(operator)}, (settings.TRACE_UPLOAD_MAX_MB + 2) << 20, 413, "TRACE_UPLOAD_MAX_MB"),
        ({"Authorization": f"Token {token}"}, (settings.TRACE_UPLOAD_MAX_MB + 2) << 20, 413, "TRACE_UPLOAD_MAX_MB"),
        ({"Authorization": f"Token {token}", "Transfer-Encoding": "chunked"}, None, 411, "Content-Length"),
        ({"Authorization": f"Token {token}"}, None, 411, "Content-Length"),
    ]
    for headers, declared, status, words in cases:
        # (no body after headers that declare none: zeros are not chunked framing)
        result = raw_upload(port, "/api/traces/", headers, declared=declared, send_at_most=64 << 20 if declared else 0,
                            watch=watch)
        assert result["status"] == status, (headers, result)
        assert words in json.loads(result["body"])["detail"], result
        assert result["written"] == 0 and result["seconds"] <= 1.0, (headers, result)
    assert not Trace.objects.exists()


def test_an_operator_upload_within_the_limit_still_goes_through(daphne, operator):
    import requests

    from tests.support.traces import real_trace

    _service, port, _folders = daphne
    token = Token.objects.create(user=operator).key
    path = real_trace("simple_add_kineto.json.gz")
    with path.open("rb") as f:
        response = requests.post(f"http://127.0.0.1:{port}/api/traces/", files={"file": (path.name, f)},
                                 headers={"Authorization": f"Token {token}"}, timeout=30)
    assert response.status_code == 201, response.text
    assert Trace.objects.get().raw_bytes == path.stat().st_size


def test_a_chunk_cut_off_is_not_counted_and_the_upload_resumes_where_the_stored_bytes_end(daphne, operator, tmp_path,
                                                                                          settings):
    import hashlib

    import requests

    from tests.support.tracegen import write_kineto_trace

    service, port, folders = daphne
    source = tmp_path / "big.json"
    write_kineto_trace(source, 12_000, seed=3)
    data = source.read_bytes()
    chunk = 1 << 20
    api = f"http://127.0.0.1:{port}/api/uploads/"
    auth = {"Authorization": f"Token {Token.objects.create(user=operator).key}"}
    upload = requests.post(api, json={"filename": "big.json", "size": len(data)}, headers=auth, timeout=10).json()
    url = f"{api}{upload['id']}/"
    assert requests.put(f"{url}?offset=0", data=data[:chunk], headers=auth, timeout=10).json()["received"] == chunk
    # The connection drops a third of the way into the second chunk.
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(f"PUT /api/uploads/{upload['id']}/?offset={chunk} HTTP/1.1\r\nHost: x\r\n"
                     f"Authorization: {auth['Authorization']}\r\nContent-Length: {chunk}\r\n\r\n".encode()
                     + data[chunk:chunk + chunk // 3])
        time.sleep(0.3)
    assert requests.get(url, headers=auth, timeout=10).json()["received"] == chunk  # where to resume
    # A chunk over TRACE_UPLOAD_CHUNK_MB is refused from its headers.
    over = raw_upload(port, f"/api/uploads/{upload['id']}/", auth, declared=(settings.TRACE_UPLOAD_CHUNK_MB + 1) << 20,
                      send_at_most=64 << 20, watch=_watch(service, folders), method="PUT")
    assert over["status"] == 413 and over["written"] == 0, over
    for offset in range(chunk, len(data), chunk):
        answer = requests.put(f"{url}?offset={offset}", data=data[offset:offset + chunk], headers=auth, timeout=10)
        assert answer.status_code == 200, answer.text
    assert requests.post(f"{url}finish/", json={"size": len(data)}, headers=auth, timeout=10).status_code == 200
    made = requests.post(f"http://127.0.0.1:{port}/api/traces/", json={"upload": upload["id"]}, headers=auth, timeout=10)
    assert made.status_code == 201, made.text
    trace = Trace.objects.get(pk=made.json()["id"])
    stored = Path(settings.STORAGES["traces"]["OPTIONS"]["location"]) / trace.raw_file
    assert hashlib.sha256(stored.read_bytes()).hexdigest() == hashlib.sha256(data).hexdigest()


def test_a_client_that_expects_100_continue_is_told_to_send_only_once_admitted(daphne, operator):
    _service, port, _folders = daphne
    for headers, first in [({}, b"HTTP/1.1 401 "),
                           ({"Authorization": f"Token {Token.objects.create(user=operator).key}"}, b"HTTP/1.1 100 Continue")]:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
            sock.sendall(("POST /api/traces/ HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\nExpect: 100-continue\r\n"
                          + "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n").encode())
            assert sock.recv(65536).startswith(first)


def test_other_routes_refuse_a_body_past_web_body_max_mb_declared_or_streamed(daphne, settings):
    service, port, folders = daphne
    watch = _watch(service, folders)
    result = raw_upload(port, "/api/devices/1/capture/", {}, watch=watch)
    assert result["status"] == 413 and "WEB_BODY_MAX_MB" in json.loads(result["body"])["detail"], result
    assert result["written"] == 0 and result["seconds"] <= 1.0, result
    # Chunked (no length): cut off once it passes the limit; what came before is dropped too.
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(b"POST /no/such/page/ HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
        chunk = b"100000\r\n" + b"\0" * (1 << 20) + b"\r\n"
        try:
            for _ in range(settings.WEB_BODY_MAX_MB + 8):
                sock.sendall(chunk)
        except OSError:
            pass
        status, body = _read_answer(sock)
    assert status == 413, body
    assert watch() == 0


def _peak_rss_mb(pid: int) -> float:
    line = next(x for x in Path(f"/proc/{pid}/status").read_text().splitlines() if x.startswith("VmHWM:"))
    return int(line.split()[1]) / 1024


def test_an_admitted_upload_is_handed_to_django_a_read_at_a_time_not_held_in_memory(daphne, operator):
    """Daphne put a whole stored body into the application's queue at once (and Twisted
    parsed a multipart body in memory): a 300 MB upload grew the web process by 600 MB."""
    service, port, _folders = daphne
    token = Token.objects.create(user=operator).key
    size = 300 << 20
    head = (b"--x\r\nContent-Disposition: form-data; name=\"file\"; filename=\"big.json\"\r\n"
            b"Content-Type: application/json\r\n\r\n[")
    tail = b"]\r\n--x--\r\n"
    before = _peak_rss_mb(service.proc.pid)
    with socket.create_connection(("127.0.0.1", port), timeout=120) as sock:
        sock.sendall(f"POST /api/traces/ HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Token {token}\r\n"
                     f"Content-Type: multipart/form-data; boundary=x\r\n"
                     f"Content-Length: {len(head) + size + len(tail)}\r\n\r\n".encode() + head)
        block = b" " * (1 << 20)
        for _ in range(size >> 20):
            sock.sendall(block)
        sock.sendall(tail)
        status, body = _read_answer(sock)
    assert status == 201, (status, body)  # its head looks like a trace's: the worker will say more
    grew = _peak_rss_mb(service.proc.pid) - before
    assert grew < 100, f"the web process grew by {grew:.0f} MB for a {size >> 20} MB upload"


def test_past_the_cap_of_bodies_in_flight_daphne_answers_429_at_once(trace_storage, tmp_path, operator):
    service, url = start_web(child_env(TRACE_STORAGE_DIR=trace_storage.location, TRACE_UPLOADS_MAX_ACTIVE=1,
                                       OTLP_TOKEN="otlp-secret"))
    try:
        port = int(url.rsplit(":", 1)[1])
        auth = f"Authorization: Token {Token.objects.create(user=operator).key}\r\n"
        head = f"POST /api/traces/ HTTP/1.1\r\nHost: 127.0.0.1\r\n{auth}Content-Length: {100 << 20}\r\n\r\n".encode()
        with socket.create_connection(("127.0.0.1", port), timeout=10) as first:
            first.sendall(head + b"\0" * (4 << 20))  # admitted: its body is on its way
            time.sleep(0.5)
            busy = raw_upload(port, "/api/traces/", {"Authorization": auth.split(": ", 1)[1].strip()},
                              declared=100 << 20, send_at_most=8 << 20)
            # Spans are not held back by the upload (issue 35): 1.2 MB of them, over the 1 MB
            # that counts in a cap, in OTLP's own.
            spans = protobuf_body(sdk_spans(3000))
            otlp = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            otlp.request("POST", "/v1/traces", body=spans, headers={
                "Authorization": "Bearer otlp-secret", "Content-Type": "application/x-protobuf"})
            sent_spans = otlp.getresponse()
            assert (len(spans) > 1 << 20, sent_spans.status) == (True, 200), sent_spans.read()
            otlp.close()
        assert busy["status"] == 429 and busy["seconds"] <= 1.0, busy
        assert "TRACE_UPLOADS_MAX_ACTIVE" in json.loads(busy["body"])["detail"]
        time.sleep(0.5)  # the first one's connection is gone: its place is free
        small = raw_upload(port, "/api/traces/", {"Authorization": auth.split(": ", 1)[1].strip()},
                           declared=2 << 20, send_at_most=2 << 20)
        assert small["status"] == 400, small  # admitted, and a body of zeros is not a form
    finally:
        service.stop()
