"""The upload gate inside Daphne: decide from the headers, before Daphne stores the body.

Daphne (through Twisted's HTTP request) writes a whole request body to a temporary file
(to memory under 100 kB) and calls the application only when the body is complete. For the
upload routes, :class:`GatedRequest` stops reading the socket once the headers are in, asks
dashboard/upload_gate.py whether the request may send its body, and only then lets it flow
into Daphne's file. A refused request gets its JSON answer at once; the bytes the client
still sends are read and dropped for a moment (so that it reads the answer rather than a
reset connection), then the connection is closed. Nothing of it is written anywhere.

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

from daphne import http_protocol
from twisted.internet import reactor

from dashboard import upload_gate

log = logging.getLogger(__name__)

#: Seconds a refused client's remaining body is read and dropped before the connection closes.
LINGER_S = 2.0


class GatedRequest(http_protocol.WebRequest):
    _gate = None  # None: not an upload route; "waiting", "admitted" or "refused"
    _process_waiting = False

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._parsePOSTFormSubmission = False

    def gotLength(self, length):
        channel = self.channel
        method = (getattr(channel, "_command", b"") or b"").decode("latin-1")
        path = (getattr(channel, "_path", b"") or b"").decode("latin-1").split("?", 1)[0]
        if upload_gate.route_of(method, path) is None:
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
            if refusal is None and not upload_gate.IN_FLIGHT.acquire():
                refusal = upload_gate.busy_refusal()
        except Exception:  # noqa: BLE001 - the gate must answer, whatever broke
            log.exception("upload gate failed")
            refusal = upload_gate.Refusal(503, "the upload gate could not check this request; try again")
        if self.channel is None:  # the client went away meanwhile
            if refusal is None:
                upload_gate.IN_FLIGHT.release()
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
        self._gate, self._early = "refused", []
        transport = self.channel.transport
        status = f"HTTP/1.1 {refusal.status} {_REASONS.get(refusal.status, 'Refused')}\r\n".encode()
        head = b"".join(name + b": " + value + b"\r\n" for name, value in refusal.response_headers())
        transport.write(status + head + b"\r\n" + refusal.body())
        if hasattr(transport, "loseWriteConnection"):
            transport.loseWriteConnection()
        self.channel._networkProducer.resumeProducing()  # read and drop what is still coming
        reactor.callLater(LINGER_S, _close, self.channel)

    def handleContentChunk(self, data):
        if self._gate is None or self._gate == "admitted":
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
        return super().process()

    def _release(self):
        if self._gate == "admitted":
            self._gate = "done"
            upload_gate.IN_FLIGHT.release()

    def finish(self):
        self._release()
        return super().finish()

    def connectionLost(self, reason):
        self._release()
        return super().connectionLost(reason)


def _close(channel) -> None:
    if channel.transport is not None:
        channel.transport.abortConnection()


_REASONS = {400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 411: "Length Required",
            413: "Content Too Large", 429: "Too Many Requests", 503: "Service Unavailable"}


def install() -> None:
    """Make Daphne build :class:`GatedRequest` for every HTTP request."""
    http_protocol.WebRequest = GatedRequest
    upload_gate.UploadGate.decided_by_server = True
