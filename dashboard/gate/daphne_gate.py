"""The upload gate inside Daphne: decide from the headers, before Daphne stores the body.

Daphne (through Twisted's HTTP request) writes a whole request body to a temporary file
(to memory under 100 kB) and calls the application only when the body is complete. For the
upload routes, :class:`GatedRequest` stops reading the socket once the headers are in, asks
dashboard/gate/upload_gate.py whether the request may send its body, and only then lets it flow
into Daphne's file. A refused request gets its JSON answer at once; the bytes the client
still sends are read and dropped for a moment (so that it reads the answer rather than a
reset connection), then the connection is closed. Nothing of it is written anywhere.

Every other route may have a body of at most WEB_BODY_MAX_MB: a larger declared length is
refused from the headers, a body without one is cut off when it passes the limit.

It also turns off Twisted's parse of form bodies into ``request.args``, which Daphne never
reads: for a multipart POST, Twisted read the whole stored body into memory and split it
(an 8 GB upload took 8 GB and more of the web process's memory before Django saw it).

:func:`install` swaps Daphne's request class for this one; dashboard/asgi.py calls it when
the process is Daphne's.
"""

from __future__ import annotations

import asyncio
import io
import logging
from functools import partial
from urllib.parse import unquote

from daphne import http_protocol
from twisted.internet import reactor

from dashboard.gate import upload_gate

log = logging.getLogger(__name__)

#: Bytes of an upload's stored body handed to the application per message.
BODY_READ_BYTES = 1 << 20
#: Seconds a refused client's remaining body is read and dropped before the connection closes.
LINGER_S = 2.0


class GatedRequest(http_protocol.WebRequest):
    _gate = None  # None: not an upload route; "waiting", "admitted" or "refused"
    _process_waiting = False
    _cap = None  # the cap (upload_gate.InFlight) this request holds a place in

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._parsePOSTFormSubmission = False

    def gotLength(self, length):
        channel = self.channel
        method = (getattr(channel, "_command", b"") or b"").decode("latin-1")
        # As Daphne gives it to the application: unquoted ("/api/%74races/" is the upload route).
        path = unquote((getattr(channel, "_path", b"") or b"").decode("latin-1").split("?", 1)[0])
        if upload_gate.route_of(method, path) is None:
            self._received = 0
            if length is not None and length > upload_gate.other_limit_bytes():
                self.content = io.BytesIO()
                return self._refuse(upload_gate.other_refusal())
            return super().gotLength(length)
        self._gate, self._early = "waiting", []
        self._length = length
        # "Expect: 100-continue" is answered once the request is admitted, not before.
        self._expects = self.requestHeaders.getRawHeaders(b"Expect")
        self.requestHeaders.removeHeader(b"Expect")
        self.content = io.BytesIO()  # stays empty: the body waits in _early until admitted
        channel._networkProducer.pauseProducing()
        headers = [(name.lower(), value) for name, values in self.requestHeaders.getAllRawHeaders() for value in values]
        asyncio.ensure_future(self._decide(method, path, headers))

    async def _decide(self, method, path, headers):
        try:
            refusal = await upload_gate.decide(method, path, headers)
            cap = upload_gate.cap_of(upload_gate.route_of(method, path), headers) if refusal is None else None
            if cap is not None and not cap.acquire():
                refusal = cap.busy()
            elif cap is not None:
                self._cap = cap
        except Exception:  # noqa: BLE001 - the gate must answer, whatever broke
            log.exception("upload gate failed")
            refusal = upload_gate.Refusal(503, "the upload gate could not check this request; try again")
        if self.channel is None:  # the client went away meanwhile
            self._release_cap()
            return
        if refusal is None:
            self._admit()
        else:
            self._refuse(refusal)

    def _admit(self):
        self._gate = "admitted"
        if self._expects and self._expects[0].lower() == b"100-continue" and not self._process_waiting:
            self.channel.transport.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        super().gotLength(self._length)
        for data in self._early:
            self.content.write(data)
        self._early = []
        if self._process_waiting:  # the whole (short) body came before the decision
            self.content.seek(0, 0)
            super().process()
        else:
            self.channel._networkProducer.resumeProducing()

    def _refuse(self, refusal: upload_gate.Refusal):
        if self._gate == "waiting":
            self.channel._networkProducer.resumeProducing()  # paused for the decision
        self._gate, self._early = "refused", []
        transport = self.channel.transport
        status = f"HTTP/1.1 {refusal.status} {_REASONS.get(refusal.status, 'Refused')}\r\n".encode()
        head = b"".join(name + b": " + value + b"\r\n" for name, value in refusal.response_headers())
        transport.write(status + head + b"\r\n" + refusal.body())
        if hasattr(transport, "loseWriteConnection"):
            transport.loseWriteConnection()
        reactor.callLater(LINGER_S, _close, self.channel)

    def handleContentChunk(self, data):
        if self._gate is None:  # another route: a body without a length is counted as it comes
            self._received += len(data)
            if self._received > upload_gate.other_limit_bytes():
                self.content.close()
                self.content = io.BytesIO()
                return self._refuse(upload_gate.other_refusal())
            return super().handleContentChunk(data)
        if self._gate == "admitted":
            return super().handleContentChunk(data)
        if self._gate == "waiting":
            self._early.append(data)  # at most what one read of the socket brought
        # refused: dropped

    def process(self):
        if self._gate == "refused":
            return None
        if self._gate == "waiting":
            self._process_waiting = True
            return None
        if self._gate == "admitted":
            self.server = _BodyFromFile(self.server)
        return super().process()

    def _release(self):
        if self._gate == "admitted":
            self._release_cap()

    def _release_cap(self):
        cap, self._cap = self._cap, None
        if cap is not None:
            cap.release()

    def finish(self):
        self._release()
        return super().finish()

    def connectionLost(self, reason):
        self._release()
        return super().connectionLost(reason)


class _BodyFromFile:
    """Daphne's server, but the application's body messages are read from the stored body
    as the application asks for them. (Daphne reads the whole stored body into the
    application's queue at once: a 2 GB upload took 2 GB of the web process's memory.)"""

    def __init__(self, server) -> None:
        self._server = server

    def __getattr__(self, name):
        return getattr(self._server, name)

    def create_application(self, protocol, scope):
        queue = _BodyQueue(protocol.content)
        protocol.content = io.BytesIO()  # Daphne's loop reads this: one empty message, dropped
        server = self._server
        assert "application_instance" not in server.connections[protocol]
        scope.setdefault("asgi", {"version": "3.0"})
        scope[upload_gate.ADMITTED] = True
        instance = server.application(scope=scope, receive=queue.get, send=partial(server.handle_reply, protocol))
        if protocol not in server.connections:
            return None
        server.connections[protocol]["application_instance"] = asyncio.ensure_future(instance)
        return queue


class _BodyQueue:
    """The receive side of one request: its body from the file, a read at a time, then what
    Daphne puts (a disconnect)."""

    def __init__(self, body) -> None:
        self.body, self.events = body, asyncio.Queue()
        self.body.seek(0, 0)

    def put_nowait(self, message) -> None:
        if message["type"] != "http.request":
            self.events.put_nowait(message)

    async def get(self):
        if self.body is None:
            return await self.events.get()
        chunk = self.body.read(BODY_READ_BYTES)
        more = len(chunk) == BODY_READ_BYTES
        if not more:
            self.body.close()
            self.body = None
        return {"type": "http.request", "body": chunk, "more_body": more}


def _close(channel) -> None:
    if channel.transport is not None:
        channel.transport.abortConnection()


_REASONS = {400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 411: "Length Required",
            413: "Content Too Large", 429: "Too Many Requests", 503: "Service Unavailable"}


def install() -> None:
    """Make Daphne build :class:`GatedRequest` for every HTTP request."""
    http_protocol.WebRequest = GatedRequest
