"""/ws/traces/<id>/ through the real Redis channel layer: who may listen, and what arrives."""

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.db import connections

from dashboard.asgi import application
from traces import events
from traces.models import Trace

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("close_thread_connections")]


@pytest.fixture
async def close_thread_connections():
    yield
    await sync_to_async(connections.close_all)()


async def headers_for(client, user):
    await sync_to_async(client.force_login)(user)
    cookie = client.cookies[settings.SESSION_COOKIE_NAME].value
    return [(b"cookie", f"{settings.SESSION_COOKIE_NAME}={cookie}".encode()), (b"origin", b"http://127.0.0.1")]


@pytest.fixture
def trace(db):
    return Trace.objects.create(name="t", source="upload")


async def connect(path, headers=()):
    communicator = WebsocketCommunicator(application, path, headers=list(headers))
    connected, code = await communicator.connect(timeout=5)
    return communicator, connected, code


async def closed_after_accept(communicator, connected) -> int:
    """The close code of a socket that was accepted and then closed (what a browser can see)."""
    assert connected, "refused before the handshake: the browser would see only 1006"
    message = await communicator.receive_output(timeout=5)
    assert message["type"] == "websocket.close"
    return message["code"]


async def test_viewer_receives_progress_and_state_changes(client, viewer, trace, clean_redis):
    communicator, connected, _ = await connect(f"/ws/traces/{trace.pk}/", await headers_for(client, viewer))
    assert connected
    await sync_to_async(events.trace_progress)(trace.pk, "capturing", 0.4, 1234)
    message = await communicator.receive_json_from(timeout=5)
    assert message == {"type": "trace.progress", "trace": trace.pk, "status": "capturing", "progress": 0.4,
                       "events": 1234, "error": "", "url": ""}
    await sync_to_async(events.trace_changed)(trace.pk, "failed", 0.4, "device stopped answering", url="/traces/1/")
    message = await communicator.receive_json_from(timeout=5)
    assert (message["type"], message["status"], message["error"]) == ("trace.changed", "failed", "device stopped answering")
    # Another trace's messages do not arrive.
    await sync_to_async(events.trace_progress)(trace.pk + 1000, "capturing", 0.1, 1)
    assert await communicator.receive_nothing(timeout=0.3)
    await communicator.disconnect()


async def test_anonymous_outsider_and_unknown_trace_are_refused(client, outsider, viewer, trace, clean_redis):
    communicator, connected, _ = await connect(f"/ws/traces/{trace.pk}/", [(b"origin", b"http://127.0.0.1")])
    assert await closed_after_accept(communicator, connected) == 4401
    communicator, connected, _ = await connect(f"/ws/traces/{trace.pk}/", await headers_for(client, outsider))
    assert await closed_after_accept(communicator, connected) == 4403
    communicator, connected, _ = await connect(f"/ws/traces/{trace.pk + 1000}/", await headers_for(client, viewer))
    assert await closed_after_accept(communicator, connected) == 4404
