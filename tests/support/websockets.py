"""Websocket clients of the project's ASGI app, through the real Redis channel layer.

(WebsocketCommunicator from its own module: `channels.testing` also loads the live-server
test case, and with it Daphne's server and Twisted, in every test process.)"""

from asgiref.sync import sync_to_async
from channels.testing.websocket import WebsocketCommunicator
from django.conf import settings

from dashboard.asgi import application

SAME_ORIGIN = (b"origin", b"http://127.0.0.1")


async def session_headers(client, user) -> list[tuple[bytes, bytes]]:
    """The headers of a browser signed in as `user` on this site: session cookie and origin."""
    await sync_to_async(client.force_login)(user)
    cookie = client.cookies[settings.SESSION_COOKIE_NAME].value
    return [(b"cookie", f"{settings.SESSION_COOKIE_NAME}={cookie}".encode()), SAME_ORIGIN]


async def connect(path: str, headers=()) -> tuple[WebsocketCommunicator, bool, int | None]:
    communicator = WebsocketCommunicator(application, path, headers=list(headers))
    connected, code = await communicator.connect(timeout=5)
    return communicator, connected, code


async def closed_after_accept(communicator, connected) -> int:
    """The close code of a socket that was accepted and then closed (what a browser can see)."""
    assert connected, "refused before the handshake: the browser would see only 1006"
    message = await communicator.receive_output(timeout=5)
    assert message["type"] == "websocket.close"
    return message["code"]
