"""/ws/traces/<id>/ through the real Redis channel layer: who may listen, and what arrives."""

import pytest
from asgiref.sync import sync_to_async

from tests.support.websockets import closed_after_accept, connect, session_headers
from traces import events
from traces.models import Trace

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("close_thread_connections")]


@pytest.fixture
def trace(db):
    return Trace.objects.create(name="t", source="upload")


async def test_viewer_receives_progress_and_state_changes(client, viewer, trace, clean_redis):
    communicator, connected, _ = await connect(f"/ws/traces/{trace.pk}/", await session_headers(client, viewer))
    assert connected
    await sync_to_async(events.trace_progress)(trace.pk, "capturing", 0.4, 1234)
    message = await communicator.receive_json_from(timeout=5)
    assert message == {"type": "trace.progress", "trace": trace.pk, "status": "capturing", "progress": 0.4,
                       "events": 1234, "error": "", "url": "", "stage": ""}
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
    communicator, connected, _ = await connect(f"/ws/traces/{trace.pk}/", await session_headers(client, outsider))
    assert await closed_after_accept(communicator, connected) == 4403
    communicator, connected, _ = await connect(f"/ws/traces/{trace.pk + 1000}/", await session_headers(client, viewer))
    assert await closed_after_accept(communicator, connected) == 4404
