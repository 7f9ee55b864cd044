"""A trace's and a job's changes go, typed, to their own group of the channel layer (an
in-memory layer here; tests/traces/test_consumers.py goes through Redis and the sockets)."""

import asyncio

import pytest
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer

from traces import events
from traces.choices import JobStatus, TraceStatus


@pytest.fixture
def layer(settings):
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    return get_channel_layer()


async def _listen(layer, group: str) -> str:
    channel = await layer.new_channel()
    await layer.group_add(group, channel)
    return channel


async def test_a_trace_s_changes_reach_its_group_only(layer):
    mine = await _listen(layer, events.trace_group(5))
    other = await _listen(layer, events.trace_group(6))
    await sync_to_async(events.trace_changed)(5, TraceStatus.READY, 1.0, "", url="/traces/5/")
    await sync_to_async(events.trace_progress)(5, TraceStatus.CAPTURING, 0.5, 1200)
    changed = await layer.receive(mine)
    assert changed == {
        "type": "trace.changed",
        "trace": 5,
        "status": "ready",
        "progress": 1.0,
        "events": None,
        "error": "",
        "url": "/traces/5/",
        "stage": "",
    }
    progress = await layer.receive(mine)
    assert (progress["type"], progress["status"], progress["events"]) == (
        "trace.progress",
        "capturing",
        1200,
    )
    with pytest.raises(asyncio.TimeoutError):
        await asyncio.wait_for(layer.receive(other), timeout=0.1)


async def test_a_job_s_state_and_its_ranks_reach_the_job_s_group(layer):
    channel = await _listen(layer, events.job_group(9))
    assert events.job_group(9) == "jobs.9" and events.trace_group(9) == "traces.9"
    await sync_to_async(events.job_changed)(9, JobStatus.COMBINING, 0.9, "")
    ranks = [{"rank": 0, "status": "ready", "progress": 1.0, "events": 10, "error": ""}]
    await sync_to_async(events.job_ranks)(9, 0.5, ranks)
    changed = await layer.receive(channel)
    assert (changed["type"], changed["job"], changed["status"]) == ("job.changed", 9, "combining")
    assert await layer.receive(channel) == {
        "type": "job.ranks",
        "job": 9,
        "progress": 0.5,
        "ranks": ranks,
    }
