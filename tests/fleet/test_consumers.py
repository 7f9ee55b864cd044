"""Websockets through the real Redis channel layer and the project's ASGI app."""

import json

import pytest
from asgiref.sync import sync_to_async
from django.conf import settings

from fleet.polling import poller
from fleet.reading.key_counters import key_counter_names
from tests.support.websockets import closed_after_accept, connect, session_headers

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("close_thread_connections")]


async def test_a_published_poll_reaches_a_signed_in_fleet_client(client, viewer, seeded_fleet):
    headers = await session_headers(client, viewer)
    communicator, connected, _ = await connect("/ws/fleet/", headers)
    assert connected
    cycle = poller.current_cycle()
    result = await sync_to_async(poller.poll_shard)(0, cycle)
    message = await communicator.receive_json_from(timeout=5)
    assert message["type"] == "fleet.polled"
    assert message["cycle"] == cycle
    assert len(message["devices"]) == result.devices > 0
    line = message["devices"][0]
    assert {"id", "health", "reasons", "counters", "sample_ts"} <= set(line)
    assert set(line["counters"]) == set(key_counter_names())
    await communicator.disconnect()


async def test_device_socket_forwards_only_its_device(client, viewer, seeded_fleet):
    headers = await session_headers(client, viewer)
    device = seeded_fleet[0]
    communicator, connected, _ = await connect(f"/ws/devices/{device.id}/", headers)
    assert connected
    shard = device.host_id % settings.POLL_SHARDS
    await sync_to_async(poller.poll_shard)(shard, poller.current_cycle())
    message = await communicator.receive_json_from(timeout=5)
    assert message["type"] == "device.polled"
    assert message["device"]["id"] == device.id
    assert await communicator.receive_nothing(timeout=0.3)
    await communicator.disconnect()


async def test_anonymous_client_is_refused(seeded_fleet):
    communicator, connected, _ = await connect("/ws/fleet/", [(b"origin", b"http://127.0.0.1")])
    assert await closed_after_accept(communicator, connected) == 4401


async def test_user_without_a_role_is_refused(client, outsider, seeded_fleet):
    headers = await session_headers(client, outsider)
    communicator, connected, _ = await connect("/ws/fleet/", headers)
    assert await closed_after_accept(communicator, connected) == 4403


async def test_unknown_device_socket_is_refused(client, viewer, seeded_fleet):
    headers = await session_headers(client, viewer)
    communicator, connected, _ = await connect("/ws/devices/999999/", headers)
    assert await closed_after_accept(communicator, connected) == 4404


async def test_foreign_origin_is_refused(client, viewer, seeded_fleet):
    headers = await session_headers(client, viewer)
    headers = [h for h in headers if h[0] != b"origin"] + [(b"origin", b"http://evil.example")]
    communicator, connected, _ = await connect("/ws/fleet/", headers)
    assert not connected


async def test_unknown_websocket_path_is_closed_with_4404(client, viewer, seeded_fleet):
    headers = await session_headers(client, viewer)
    for path in ("/ws/nothing/", "/ws/devices/abc/", "/elsewhere"):
        communicator, connected, _ = await connect(path, headers)
        assert await closed_after_accept(communicator, connected) == 4404, path


async def _socket_after_a_change(client, viewer, change, settings):
    """Open a fleet socket, apply `change` to the user, poll twice: what does the socket get?"""
    settings.POLL_INTERVAL = 0.5  # the access check runs at most once per half interval
    headers = await session_headers(client, viewer)
    communicator, connected, _ = await connect("/ws/fleet/", headers)
    assert connected
    await sync_to_async(change)()
    import asyncio

    await asyncio.sleep(0.3)
    await sync_to_async(poller.poll_shard)(0, poller.current_cycle())
    return await communicator.receive_output(timeout=5)


async def test_signing_out_closes_the_socket_within_a_poll(client, viewer, seeded_fleet, settings):
    message = await _socket_after_a_change(client, viewer, client.logout, settings)
    assert message == {"type": "websocket.close", "code": 4401}


async def test_deactivating_the_user_closes_the_socket_within_a_poll(client, viewer, seeded_fleet, settings):
    def deactivate():
        viewer.is_active = False
        viewer.save(update_fields=["is_active"])

    message = await _socket_after_a_change(client, viewer, deactivate, settings)
    assert message == {"type": "websocket.close", "code": 4401}


async def test_losing_the_permission_closes_the_socket_within_a_poll(client, viewer, seeded_fleet, settings):
    message = await _socket_after_a_change(client, viewer, viewer.groups.clear, settings)
    assert message == {"type": "websocket.close", "code": 4403}


async def test_a_user_who_keeps_access_keeps_getting_polls(client, viewer, seeded_fleet, settings):
    message = await _socket_after_a_change(client, viewer, lambda: None, settings)
    assert message["type"] == "websocket.send"


async def test_tabs_of_one_session_share_the_access_check_and_all_close_when_it_fails(
    client, viewer, seeded_fleet, settings, monkeypatch
):
    """Two fleet sockets of one browser session: one access check per half interval serves
    both, and signing out closes both."""
    from fleet import consumers

    settings.POLL_INTERVAL = 0.5
    checks, batched = [], []
    real, real_batch = consumers.SignedInConsumer.refusal, consumers.refusals
    monkeypatch.setattr(consumers.SignedInConsumer, "refusal", lambda self: checks.append(1) or real(self))
    monkeypatch.setattr(consumers, "refusals", lambda sockets: batched.append(len(sockets)) or real_batch(sockets))
    headers = await session_headers(client, viewer)
    tabs = []
    for _ in range(2):
        communicator, connected, _ = await connect("/ws/fleet/", headers)
        assert connected
        tabs.append(communicator)
    assert len(checks) == 2  # one each on connecting
    import asyncio

    await asyncio.sleep(0.3)
    await sync_to_async(poller.poll_shard)(0, poller.current_cycle())
    for tab in tabs:
        assert (await tab.receive_output(timeout=5))["type"] == "websocket.send"
    assert batched == [1]  # one shared check for the two tabs

    await sync_to_async(client.logout)()
    await asyncio.sleep(0.3)
    await sync_to_async(poller.poll_shard)(0, poller.current_cycle() + settings.POLL_INTERVAL)
    for tab in tabs:
        assert await tab.receive_output(timeout=5) == {"type": "websocket.close", "code": 4401}
    assert batched == [1, 1]


def test_the_access_of_many_sockets_is_decided_in_a_few_queries(viewer, outsider, django_assert_max_num_queries):
    """One batch: a viewer's sockets are let be, a user without the permission is refused
    with 4403, a signed-out session, a deactivated user and an anonymous one with 4401;
    three queries whatever the number of sockets, each decided as `refusal()` decides it."""
    from django.contrib.auth.models import AnonymousUser, User
    from django.contrib.sessions.backends.db import SessionStore
    from django.test import Client
    from django.utils.functional import LazyObject

    from fleet import consumers

    def socket(user):
        session = SessionStore()
        if user is not None:
            browser = Client()
            browser.force_login(user)
            session = SessionStore(session_key=browser.session.session_key)
        lazy = LazyObject()  # as channels' session middleware puts it in the scope
        lazy._wrapped = session
        page = consumers.FleetConsumer()
        page.scope = {"user": user or AnonymousUser(), "session": lazy}
        return page

    gone = User.objects.create_user("gone")
    gone.groups.set(viewer.groups.all())
    inactive = User.objects.create_user("inactive")
    inactive.groups.set(viewer.groups.all())
    sockets = [socket(viewer) for _ in range(20)] + [socket(outsider), socket(gone), socket(inactive), socket(None)]
    sockets[-3].scope["session"]._wrapped.delete()  # signed out
    User.objects.filter(pk=inactive.pk).update(is_active=False)
    expected = [None] * 20 + [4403, 4401, 4401, 4401]
    assert [s.refusal() for s in sockets] == expected
    with django_assert_max_num_queries(3):
        assert consumers.refusals(sockets) == expected


async def test_a_fleet_client_gets_only_the_rows_of_its_page_and_the_summary(client, viewer, seeded_fleet):
    """The page says which rows it shows; each shard poll then brings those rows of the
    shard, and the fleet's summary only when it changed."""
    headers = await session_headers(client, viewer)
    communicator, connected, _ = await connect("/ws/fleet/", headers)
    assert connected
    shard_of = {d.id: d.host_id % settings.POLL_SHARDS for d in seeded_fleet}
    shown = [next(i for i, s in shard_of.items() if s == 0), next(i for i, s in shard_of.items() if s == 1)]
    await communicator.send_json_to({"type": "subscribe", "devices": shown})
    assert await communicator.receive_json_from(timeout=5) == {"type": "subscribed", "devices": 2}

    cycle = poller.current_cycle()
    await sync_to_async(poller.poll_shard)(0, cycle)
    first = await communicator.receive_json_from(timeout=5)
    assert first["shard"] == 0 and [line["id"] for line in first["devices"]] == [shown[0]]
    assert first["summary"]["devices"] == len(seeded_fleet)
    assert first["summary"]["health_counts"]["unknown"] == sum(1 for s in shard_of.values() if s == 1)

    await sync_to_async(poller.poll_shard)(1, cycle)
    second = await communicator.receive_json_from(timeout=5)
    assert [line["id"] for line in second["devices"]] == [shown[1]]
    assert second["summary"]["health_counts"]["unknown"] == 0  # shard 1 was polled: it changed

    await sync_to_async(poller.poll_shard)(0, cycle + 5)
    third = await communicator.receive_json_from(timeout=5)
    assert [line["id"] for line in third["devices"]] == [shown[0]]
    assert "summary" not in third  # the same as last sent

    await communicator.send_json_to({"type": "subscribe", "devices": [shown[1]]})
    await communicator.receive_json_from(timeout=5)
    await sync_to_async(poller.poll_shard)(0, cycle + 10)
    assert await communicator.receive_nothing(timeout=0.5)  # none of its rows, nothing new
    await communicator.disconnect()


@pytest.mark.parametrize(
    "frame",
    ['{"type": "subscribe", "devices": ["1"]}', '{"type": "subscribe"}', '{"type": "dance"}', "not json", "[1, 2]",
     json.dumps({"type": "subscribe", "devices": list(range(201))})],
)
async def test_a_bad_subscribe_message_is_answered_with_an_error_and_the_socket_stays(client, viewer, seeded_fleet, frame):
    headers = await session_headers(client, viewer)
    communicator, connected, _ = await connect("/ws/fleet/", headers)
    assert connected
    await communicator.send_to(text_data=frame)
    reply = await communicator.receive_json_from(timeout=5)
    assert reply["type"] == "error" and reply["error"]
    await communicator.send_json_to({"type": "subscribe", "devices": [seeded_fleet[0].id]})
    assert await communicator.receive_json_from(timeout=5) == {"type": "subscribed", "devices": 1}
    await communicator.disconnect()


async def test_a_poll_message_is_a_few_bytes_and_its_devices_are_read_once_beside_it(seeded_fleet):
    """What the channel layer copies to every fleet socket is a few bytes whatever the
    shard's size; the list of polled devices is written once beside it, by poll id."""
    import msgpack
    from channels.layers import get_channel_layer

    from fleet.events import polled_ids, shard_group

    layer = get_channel_layer()
    listener = await layer.new_channel()
    await layer.group_add(shard_group(0), listener)
    result = await sync_to_async(poller.poll_shard)(0, poller.current_cycle())
    message = await layer.receive(listener)
    await layer.group_discard(shard_group(0), listener)
    assert set(message) == {"type", "poll", "shard", "cycle"}
    assert len(msgpack.packb(message)) < 100
    polled = await sync_to_async(polled_ids)(message["poll"])
    assert polled == {d.id for d in seeded_fleet if d.host_id % settings.POLL_SHARDS == 0}
    assert len(polled) == result.devices
    assert await sync_to_async(polled_ids)("no-such-poll") == frozenset()
