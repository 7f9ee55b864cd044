"""The upload gate as ASGI middleware (any ASGI server; under Daphne it also runs after
Daphne's own check): refusals from the headers, and a body that grows past its declared
length is cut off with 413 while it streams."""

import json

import pytest
from rest_framework.authtoken.models import Token

from dashboard.gate.upload_gate import IN_FLIGHT, OTLP_IN_FLIGHT, UploadGate

pytestmark = pytest.mark.django_db(transaction=True)


class Reader:
    """The application behind the gate: reads the whole body, answers 200 with its size."""

    def __init__(self):
        self.called = False

    async def __call__(self, scope, receive, send):
        self.called, size = True, 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            size += len(message.get("body", b""))
            if not message.get("more_body"):
                break
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": str(size).encode()})


async def call(headers: dict, bodies: list[bytes], path="/api/traces/"):
    app = Reader()
    messages = [{"type": "http.request", "body": b, "more_body": i < len(bodies) - 1} for i, b in enumerate(bodies)]
    sent = []

    async def receive():
        return messages.pop(0) if messages else {"type": "http.disconnect"}

    async def send(message):
        sent.append(message)

    scope = {"type": "http", "method": "POST", "path": path,
             "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()]}
    await UploadGate(app)(scope, receive, send)
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return sent[0]["status"], body, app.called


@pytest.fixture
def token(operator):
    return Token.objects.create(user=operator).key


async def test_refusals_come_before_the_application_reads_a_byte(token, viewer, close_thread_connections):
    status, body, called = await call({"Content-Length": "10"}, [b"x" * 10])
    assert (status, called) == (401, False)
    assert json.loads(body) == {"detail": "Authentication credentials were not provided."}
    status, body, called = await call({"Authorization": f"Token {token}"}, [b"x" * 10])
    assert (status, called) == (411, False)
    status, body, called = await call({"Authorization": f"Token {token}", "Content-Length": str(100 << 30)}, [b"x"])
    assert (status, called) == (413, False) and b"TRACE_UPLOAD_MAX_MB" in body


async def test_a_body_longer_than_its_declared_length_is_cut_off_with_413(token, close_thread_connections):
    auth = {"Authorization": f"Token {token}"}
    assert await call({**auth, "Content-Length": "20"}, [b"x" * 10, b"y" * 10]) == (200, b"20", True)
    status, body, called = await call({**auth, "Content-Length": "20"}, [b"x" * 10, b"y" * 10, b"z" * 10])
    assert (status, called) == (413, True) and b"grew past" in body


async def test_past_the_cap_of_uploads_in_flight_is_429_but_small_bodies_pass(token, settings, close_thread_connections):
    settings.TRACE_UPLOADS_MAX_ACTIVE = 1
    assert IN_FLIGHT.acquire()
    try:
        status, body, called = await call({"Authorization": f"Token {token}", "Content-Length": str(2 << 20)}, [b"x"])
    finally:
        IN_FLIGHT.release()
        small = await call({"Authorization": f"Token {token}", "Content-Length": "1"}, [b"x"])
    assert (status, called) == (429, False) and b"TRACE_UPLOADS_MAX_ACTIVE" in body
    assert small == (200, b"1", True)  # a JSON request naming finished uploads is not held back


async def test_span_uploads_and_the_otlp_receiver_are_refused_before_a_byte_is_read(token, settings,
                                                                                     close_thread_connections):
    """Spans beside a trace or a job are uploads like traces (an operator's, up to
    SPAN_UPLOAD_MAX_MB), and OTLP's receiver takes its bearer token: neither lets an anonymous
    body in to be stored before its view says no."""
    settings.OTLP_TOKEN, settings.SPAN_UPLOAD_MAX_MB, settings.OTLP_MAX_BODY_MB = "otlp-secret", 64.0, 1.0
    for path in ("/api/traces/7/spans/", "/api/jobs/7/spans/"):
        status, _, called = await call({"Content-Length": "10"}, [b"x" * 10], path=path)
        assert (status, called) == (401, False), path
        status, body, called = await call({"Authorization": f"Token {token}", "Content-Length": str(66 << 20)},
                                          [b"x"], path=path)
        assert (status, called) == (413, False) and b"SPAN_UPLOAD_MAX_MB" in body, path
        status, _, called = await call({"Authorization": f"Token {token}", "Content-Length": "10"}, [b"x" * 10], path=path)
        assert (status, called) == (200, True), path  # past the gate: the view decides the rest
    status, _, called = await call({"Content-Length": "10"}, [b"x" * 10], path="/v1/traces")
    assert (status, called) == (401, False)
    status, _, called = await call({"Authorization": "Bearer wrong", "Content-Length": "10"}, [b"x" * 10], path="/v1/traces")
    assert (status, called) == (401, False)
    status, body, called = await call({"Authorization": "Bearer otlp-secret", "Content-Length": str(2 << 20)},
                                      [b"x"], path="/v1/traces")
    assert (status, called) == (413, False) and b"OTLP_MAX_BODY_MB" in body
    status, _, called = await call({"Authorization": "Bearer otlp-secret", "Content-Length": "10"}, [b"x" * 10],
                                   path="/v1/traces")
    assert (status, called) == (200, True)
    settings.OTLP_TOKEN = ""
    status, _, called = await call({"Content-Length": "10"}, [b"x" * 10], path="/v1/traces")
    assert (status, called) == (503, False)


async def test_otlp_requests_are_never_held_back_by_trace_uploads(token, settings, close_thread_connections):
    """Issue 35: spans got 429 while traces uploaded. An OTLP body counts in a cap of its own
    (OTLP_MAX_ACTIVE, for bodies over 1 MB; smaller ones in none), so uploads filling
    TRACE_UPLOADS_MAX_ACTIVE leave the receiver open, and spans leave uploads open."""
    settings.OTLP_TOKEN, settings.OTLP_MAX_BODY_MB = "otlp-secret", 16.0
    settings.TRACE_UPLOADS_MAX_ACTIVE, settings.OTLP_MAX_ACTIVE = 1, 1
    spans = {"Authorization": "Bearer otlp-secret"}
    upload = {"Authorization": f"Token {token}", "Content-Length": str(2 << 20)}
    assert IN_FLIGHT.acquire()  # a trace upload is being received: the upload cap is full
    try:
        small = await call({**spans, "Content-Length": "10"}, [b"x" * 10], path="/v1/traces")
        large = await call({**spans, "Content-Length": str(2 << 20)}, [b"x" * (2 << 20)], path="/v1/traces")
        assert (small, large) == ((200, b"10", True), (200, str(2 << 20).encode(), True))
        assert (await call(upload, [b"x"]))[0] == 429
    finally:
        IN_FLIGHT.release()
    assert OTLP_IN_FLIGHT.acquire()  # a large OTLP body is being received: its own cap is full
    try:
        status, body, called = await call({**spans, "Content-Length": str(2 << 20)}, [b"x"], path="/v1/traces")
        assert (status, called) == (429, False) and b"OTLP_MAX_ACTIVE" in body
        assert (await call({**spans, "Content-Length": "10"}, [b"x" * 10], path="/v1/traces"))[0] == 200
        assert (await call({**upload, "Content-Length": "1"}, [b"x"]))[0] == 200
        assert (await call(upload, [b"x" * (2 << 20)]))[:2] == (200, str(2 << 20).encode())
    finally:
        OTLP_IN_FLIGHT.release()
    assert (IN_FLIGHT.count, OTLP_IN_FLIGHT.count) == (0, 0)
