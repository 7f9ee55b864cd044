"""The gate in front of the upload routes: who may send a body, and how large, is decided
from the request's headers, before a byte of the body is read.

The routes that take large bodies (a trace or a job as one multipart POST, a chunk of a
resumable upload) are refused here when the sender is not signed in (401) or may not upload
(403), when the body has no declared length or comes chunked (411), when the declared length
is over the limit (413), or when this process already receives as many uploads as it may
(429: TRACE_UPLOADS_MAX_ACTIVE; OTLP requests over 1 MB have a cap of their own,
OTLP_MAX_ACTIVE, and smaller bodies count in none). Each answer is JSON in the API's shape (``{"detail": "..."}``). A body admitted is
counted as it streams: one that grows past its declared length or the limit is cut off (413).

:class:`UploadGate` is the ASGI middleware (any ASGI server); Daphne reads the whole body
before it calls the application, so dashboard/gate/daphne_gate.py asks :func:`decide` at the
moment Daphne has the headers, and the body of a refused request is never stored.
"""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass, field
from http.cookies import SimpleCookie

from asgiref.sync import sync_to_async
from django.conf import settings

UPLOAD_PERMISSION = "traces.upload_trace"
#: Multipart framing (boundaries, the form's other fields) beside the file itself.
MULTIPART_SLACK = 1 << 20
#: The scope key dashboard/gate/daphne_gate.py sets on a request it admitted.
ADMITTED = "asicmon.upload_admitted"
#: Bodies up to this size (a JSON request naming finished uploads) do not count in the cap.
SMALL_BODY = 1 << 20


@dataclass(frozen=True)
class Route:
    method: str
    path: re.Pattern
    what: str  # "upload" (a whole file), "chunk" (of a resumable upload), "spans" (a span file), "otlp"

    def limit_bytes(self) -> int:
        if self.what == "chunk":
            return settings.TRACE_UPLOAD_CHUNK_MB << 20
        if self.what == "spans":
            return int(settings.SPAN_UPLOAD_MAX_MB * (1 << 20)) + MULTIPART_SLACK
        if self.what == "otlp":
            return int(settings.OTLP_MAX_BODY_MB * (1 << 20))
        return (settings.TRACE_UPLOAD_MAX_MB << 20) + MULTIPART_SLACK

    def limit_words(self) -> str:
        if self.what == "chunk":
            return f"a chunk may be at most {settings.TRACE_UPLOAD_CHUNK_MB} MB (TRACE_UPLOAD_CHUNK_MB)"
        if self.what == "spans":
            return f"a span file may be at most {settings.SPAN_UPLOAD_MAX_MB:g} MB (SPAN_UPLOAD_MAX_MB)"
        if self.what == "otlp":
            return f"an OTLP request may be at most {settings.OTLP_MAX_BODY_MB:g} MB as sent (OTLP_MAX_BODY_MB)"
        return (f"the upload is larger than the {settings.TRACE_UPLOAD_MAX_MB} MB that uploads may be "
                "(TRACE_UPLOAD_MAX_MB); send larger traces through the resumable upload API (/api/uploads/)")


ROUTES = (
    Route("POST", re.compile(r"^/api/traces/?$"), "upload"),
    Route("POST", re.compile(r"^/api/jobs/?$"), "upload"),
    Route("PUT", re.compile(r"^/api/uploads/[^/]+/?$"), "chunk"),
    Route("POST", re.compile(r"^/api/(?:traces|jobs)/\d+/spans/?$"), "spans"),
    Route("POST", re.compile(r"^/v1/traces/?$"), "otlp"),
)


def route_of(method: str, path: str) -> Route | None:
    return next((r for r in ROUTES if r.method == method and r.path.match(path)), None)


@dataclass
class Refusal:
    status: int
    detail: str
    headers: list[tuple[bytes, bytes]] = field(default_factory=list)

    def body(self) -> bytes:
        return json.dumps({"detail": self.detail}).encode()

    def response_headers(self) -> list[tuple[bytes, bytes]]:
        return [(b"content-type", b"application/json"), (b"content-length", str(len(self.body())).encode()),
                (b"connection", b"close"), *self.headers]


class InFlight:
    """How many bodies of one kind this process is receiving, against the cap `setting` names."""

    def __init__(self, setting: str, what: str) -> None:
        self.setting, self.what = setting, what
        self.count = 0
        self._lock = threading.Lock()

    def limit(self) -> int:
        return getattr(settings, self.setting)

    def acquire(self) -> bool:
        with self._lock:
            if self.count >= self.limit():
                return False
            self.count += 1
            return True

    def release(self) -> None:
        with self._lock:
            self.count = max(0, self.count - 1)

    def busy(self) -> Refusal:
        return Refusal(429, f"the server is already receiving {self.limit()} {self.what} ({self.setting}); "
                            "try again in a moment", [(b"retry-after", b"5")])


#: Trace and job uploads, chunks and span files (up to gigabytes each).
IN_FLIGHT = InFlight("TRACE_UPLOADS_MAX_ACTIVE", "uploads")
#: OTLP requests (at most OTLP_MAX_BODY_MB): a cap of their own, so that services' spans are
#: never refused because traces are uploading, nor uploads because spans are arriving.
OTLP_IN_FLIGHT = InFlight("OTLP_MAX_ACTIVE", "OTLP requests over 1 MB")


def _header(headers: list[tuple[bytes, bytes]], name: bytes) -> bytes | None:
    return next((value for key, value in headers if key.lower() == name), None)


def _user_of(headers: list[tuple[bytes, bytes]]):
    """The user a token or a session cookie names; None when they name nobody; raises
    ValueError with DRF's words for a bad token."""
    from django.contrib.auth import get_user
    from django.contrib.auth.models import AnonymousUser
    from rest_framework.authentication import TokenAuthentication
    from rest_framework.exceptions import AuthenticationFailed

    authorization = (_header(headers, b"authorization") or b"").decode("latin-1").split()
    if authorization and authorization[0].lower() == "token":
        if len(authorization) != 2:
            raise ValueError("Invalid token header.")
        try:
            user, _token = TokenAuthentication().authenticate_credentials(authorization[1])
        except AuthenticationFailed as exc:
            raise ValueError(str(exc.detail)) from None
        return user
    cookie = SimpleCookie()
    try:
        cookie.load((_header(headers, b"cookie") or b"").decode("latin-1"))
    except Exception:  # noqa: BLE001 - a malformed cookie header names nobody
        return None
    morsel = cookie.get(settings.SESSION_COOKIE_NAME)
    if morsel is None:
        return None
    from importlib import import_module

    store = import_module(settings.SESSION_ENGINE).SessionStore(session_key=morsel.value)
    user = get_user(type("SessionOnly", (), {"session": store})())
    return None if isinstance(user, AnonymousUser) else user


def _otlp_refusal(headers) -> Refusal | None:
    """The OTLP receiver's bearer token (traces/requests/receiver.py checks it again)."""
    import hmac

    if not settings.OTLP_TOKEN:
        return Refusal(503, "The OTLP receiver is off: set OTLP_TOKEN.")
    scheme, _, credentials = (_header(headers, b"authorization") or b"").decode("latin-1").partition(" ")
    if scheme.lower() == "bearer" and hmac.compare_digest(credentials.strip().encode(), settings.OTLP_TOKEN.encode()):
        return None
    return Refusal(401, "A valid 'Authorization: Bearer <OTLP_TOKEN>' header is required.",
                   [(b"www-authenticate", b"Bearer")])


def _who_refusal(headers) -> Refusal | None:
    from django.db import connection

    try:
        user = _user_of(headers)
        allowed = user is not None and user.has_perm(UPLOAD_PERMISSION)
    except ValueError as exc:
        return Refusal(401, str(exc), [(b"www-authenticate", b"Token")])
    finally:
        connection.close()  # back to the pool: the gate's threads keep no connection
    if user is None or not user.is_active:
        return Refusal(401, "Authentication credentials were not provided.", [(b"www-authenticate", b"Token")])
    if not allowed:
        return Refusal(403, "You need the 'upload trace' permission (the operators role) to upload a trace.")
    return None


def size_refusal(route: Route, headers) -> Refusal | None:
    """411 without a declared length (or chunked), 413 over the limit."""
    if (_header(headers, b"transfer-encoding") or b"").strip().lower() not in (b"", b"identity"):
        return Refusal(411, "an upload must declare its size (Content-Length); chunked bodies are refused")
    raw = _header(headers, b"content-length")
    if raw is None:
        return Refusal(411, "an upload must declare its size (Content-Length)")
    if not raw.strip().isdigit():
        return Refusal(400, f"Content-Length {raw.decode('latin-1')!r} is not a number of bytes")
    if int(raw) > route.limit_bytes():
        return Refusal(413, route.limit_words())
    return None


async def decide(method: str, path: str, headers) -> Refusal | None:
    """Why this request may not send its body, or None (also for routes not gated)."""
    route = route_of(method, path)
    if route is None:
        return None
    if route.what == "otlp":
        refusal = _otlp_refusal(headers)
    else:
        refusal = await sync_to_async(_who_refusal, thread_sensitive=False)(headers)
    return refusal or size_refusal(route, headers)


def other_limit_bytes() -> int:
    """The largest body of any route but the upload routes (WEB_BODY_MAX_MB)."""
    return settings.WEB_BODY_MAX_MB << 20


def other_refusal() -> Refusal:
    return Refusal(413, f"a request body may be at most {settings.WEB_BODY_MAX_MB} MB here (WEB_BODY_MAX_MB); "
                        "traces are uploaded through /api/traces/ or /api/uploads/")


def counts_in_cap(headers) -> bool:
    raw = _header(headers, b"content-length") or b"0"
    return int(raw) > SMALL_BODY if raw.strip().isdigit() else True


def cap_of(route: Route, headers) -> InFlight | None:
    """The cap a body admitted on `route` counts in: none up to SMALL_BODY (a JSON request
    naming finished uploads, a batch of spans), OTLP's own for the receiver, else the uploads'."""
    if not counts_in_cap(headers):
        return None
    return OTLP_IN_FLIGHT if route.what == "otlp" else IN_FLIGHT


async def send_refusal(send, refusal: Refusal) -> None:
    await send({"type": "http.response.start", "status": refusal.status, "headers": refusal.response_headers()})
    await send({"type": "http.response.body", "body": refusal.body()})


class UploadGate:
    """ASGI middleware: refuse an upload from its headers; count its body as it streams."""

    def __init__(self, app) -> None:
        self.app = app

    async def __call__(self, scope, receive, send):
        route = route_of(scope["method"], scope["path"]) if scope["type"] == "http" else None
        if route is None:
            return await self.app(scope, receive, send)
        if scope.get(ADMITTED):  # Daphne decided (and counts it) before reading the body
            return await self._admitted(route, scope, receive, send)
        headers = scope["headers"]
        if refusal := await decide(scope["method"], scope["path"], headers):
            return await send_refusal(send, refusal)
        cap = cap_of(route, headers)
        if cap is not None and not cap.acquire():
            return await send_refusal(send, cap.busy())
        try:
            await self._admitted(route, scope, receive, send)
        finally:
            if cap is not None:
                cap.release()

    async def _admitted(self, route: Route, scope, receive, send) -> None:
        limit = min(route.limit_bytes(), int(_header(scope["headers"], b"content-length")))
        state = {"read": 0, "over": False, "started": False}

        async def counted_receive():
            if state["over"]:
                return {"type": "http.disconnect"}
            message = await receive()
            if message["type"] == "http.request":
                state["read"] += len(message.get("body", b""))
                if state["read"] > limit:
                    state["over"] = True
                    return {"type": "http.disconnect"}
            return message

        async def watched_send(message):
            if message["type"] == "http.response.start":
                state["started"] = True
            await send(message)

        await self.app(scope, counted_receive, watched_send)
        if state["over"] and not state["started"]:
            await send_refusal(send, Refusal(413, "the body grew past its declared Content-Length or the limit: "
                                                  + route.limit_words()))
