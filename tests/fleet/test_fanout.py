"""The web process's poll listener (fleet/fanout.py): one member of the shard groups per
process, a poll read once for every page it holds, each page sent its own rows; through the
real Redis channel layer and the project's ASGI app."""

import json

import pytest
from asgiref.sync import sync_to_async
from django.conf import settings

from fleet.polling import poller
from tests.support.websockets import connect, session_headers

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("close_thread_connections")]


async def _poll_id_of_shard_0() -> str:
    from channels.layers import get_channel_layer

    from fleet.events import shard_group

    layer = get_channel_layer()
    listener = await layer.new_channel()
    await layer.group_add(shard_group(0), listener)
    await sync_to_async(poller.poll_shard)(0, poller.current_cycle())
    message = await layer.receive(listener)
    await layer.group_discard(shard_group(0), listener)
    return message["poll"]


async def _group_members(shard: int) -> int:
    from channels.layers import get_channel_layer

    from fleet.events import shard_group

    layer = get_channel_layer()
    async with layer.connection(layer.consistent_hash(shard_group(shard))) as connection:
        return await connection.zcard(layer._group_key(shard_group(shard)))


async def _open_page(headers, rows):
    communicator, connected, _ = await connect("/ws/fleet/", headers)
    assert connected
    await communicator.send_json_to({"type": "subscribe", "devices": rows})
    assert (await communicator.receive_json_from(timeout=5))["type"] == "subscribed"
    return communicator


async def test_pages_of_one_process_get_their_own_rows_from_one_delivery(client, viewer, seeded_fleet, monkeypatch):
    """Two pages showing different rows: the shard groups hold one member for the process,
    not one per page; one delivery and one read of the latest lines serve both pages, and
    each gets only its own rows."""
    from fleet import fanout

    reads = []
    real = fanout.latest_lines
    monkeypatch.setattr(fanout, "latest_lines", lambda ids: reads.append(list(ids)) or real(ids))
    headers = await session_headers(client, viewer)
    in_shard_0 = [d.id for d in seeded_fleet if d.host_id % settings.POLL_SHARDS == 0]
    pages = [(await _open_page(headers, rows), rows) for rows in ([in_shard_0[0]], [in_shard_0[1], in_shard_0[2]])]
    assert [await _group_members(shard) for shard in range(settings.POLL_SHARDS)] == [1] * settings.POLL_SHARDS
    before = fanout.fanout().polls_read
    await sync_to_async(poller.poll_shard)(0, poller.current_cycle())
    for communicator, rows in pages:
        message = await communicator.receive_json_from(timeout=5)
        assert [line["id"] for line in message["devices"]] == sorted(rows)
    assert fanout.fanout().polls_read == before + 1
    assert reads == [sorted(in_shard_0[:3])]
    for communicator, _ in pages:
        await communicator.disconnect()


async def test_a_closed_page_stops_receiving_and_a_process_without_pages_reads_nothing(
    client, viewer, seeded_fleet, monkeypatch
):
    from fleet import fanout

    headers = await session_headers(client, viewer)
    in_shard_0 = [d.id for d in seeded_fleet if d.host_id % settings.POLL_SHARDS == 0]
    staying = await _open_page(headers, [in_shard_0[0]])
    leaving = await _open_page(headers, [in_shard_0[1]])
    await leaving.disconnect()
    assert len(fanout.fanout().pages) == 1
    await sync_to_async(poller.poll_shard)(0, poller.current_cycle())
    assert [line["id"] for line in (await staying.receive_json_from(timeout=5))["devices"]] == [in_shard_0[0]]

    await staying.disconnect()
    assert fanout.fanout().task is None
    assert [await _group_members(shard) for shard in range(settings.POLL_SHARDS)] == [0] * settings.POLL_SHARDS
    reads = []
    monkeypatch.setattr(fanout, "polled_ids", lambda poll: reads.append(poll) or frozenset())
    monkeypatch.setattr(fanout, "latest_lines", lambda ids: reads.append(ids) or [])
    before = fanout.fanout().polls_read
    await sync_to_async(poller.poll_shard)(0, poller.current_cycle() + settings.POLL_INTERVAL)
    import asyncio

    await asyncio.sleep(0.3)
    assert reads == [] and fanout.fanout().polls_read == before


@pytest.mark.slow  # over 1.5 s on 2 cores: in make test, out of make test-fast
async def test_rows_a_page_shows_since_its_process_read_the_lines_are_read_apart(seeded_fleet):
    """A page that changed its rows after the process read the open pages' lines still gets
    them (read for it alone)."""
    from fleet import fanout

    poll_id = await _poll_id_of_shard_0()
    device = next(d.id for d in seeded_fleet if d.host_id % settings.POLL_SHARDS == 0)
    event = {"type": "fleet.polled", "poll": poll_id, "shard": 0, "cycle": 1.0}
    poll = await fanout.read_poll(event, frozenset(), with_summary=False)  # no page open
    assert poll.lines == {} and device in poll.ids and poll.summary is None
    lines = await poll.lines_of([device])
    assert [json.loads(line)["id"] for line in lines] == [device]
