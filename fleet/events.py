"""The fleet app's one talker to the channel layer: typed payloads, one per event type.

The poll calls these after its writes; each web process's poll listener (fleet/fanout.py),
the one member of the shard groups for all the process's pages, reads what arrives and
hands each page its rows. A poll of a shard produces exactly one message of a few bytes,
whatever the number of devices and counters, delivered once per web process with a page
open. The list of polled devices is written once to Redis beside it (`polled_ids` reads
it, once per web process), and the listener reads the latest snapshots of the rows its
pages show (`latest_lines`): no page's socket carries, nor decodes, the fleet.
"""

import uuid
from array import array
from typing import Literal, TypedDict

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.conf import settings

from fleet.polling import snapshots
from fleet.reading.key_counters import key_counter_names
from fleet.redis import get_redis, key

# How long a poll's list of devices stays readable, in poll intervals: far longer than a
# message waits in the channel layer (its expiry is 30 s).
POLLED_KEPT_INTERVALS = 12


class DeviceLine(TypedDict):
    """The compact per-device part of a poll message."""

    id: int
    health: str
    reasons: list[str]
    driver_status: str | None
    counters: dict[str, float | None]  # the key counters (fleet.reading.key_counters), raw values
    sample_ts: float | None


class ShardPolled(TypedDict):
    type: Literal["fleet.polled"]
    poll: str  # unique to this message: what consumers compute once per poll is keyed by it
    shard: int
    cycle: float
    # The devices polled are read with `polled_ids(poll)`; their lines are their snapshots.


def shard_group(shard: int) -> str:
    return f"fleet.shard.{shard}"


def device_line(device_id: int, snapshot: dict) -> DeviceLine:
    """A device's line of a poll message, from its snapshot (with health added)."""
    return {
        "id": device_id,
        "health": snapshot.get("health", "unknown"),
        "reasons": snapshot.get("health_reasons", []),
        "driver_status": snapshot.get("driver_status"),
        "counters": {name: snapshot.get(name) for name in key_counter_names()},
        "sample_ts": snapshot.get("sample_ts"),
    }


def latest_lines(device_ids: list[int]) -> list[DeviceLine]:
    """The lines of devices from their latest snapshots (one Redis call), in the order
    asked; a device without a snapshot is left out."""
    latest = snapshots.read_snapshots(device_ids)
    return [device_line(i, latest[i]) for i in device_ids if i in latest]


def _polled_key(poll: str) -> str:
    return key("polled", poll)


def shard_polled(shard: int, cycle: float, device_ids: list[int]) -> None:
    """Publishes a shard's poll, written before (snapshots and health index included): the
    list of its devices once, then a message that names it."""
    poll = uuid.uuid4().hex
    kept = max(60, round(POLLED_KEPT_INTERVALS * settings.POLL_INTERVAL))
    get_redis().set(_polled_key(poll), array("q", device_ids).tobytes(), ex=kept)
    message: ShardPolled = {"type": "fleet.polled", "poll": poll, "shard": shard, "cycle": cycle}
    async_to_sync(get_channel_layer().group_send)(shard_group(shard), message)


def polled_ids(poll: str) -> frozenset[int]:
    """The devices of a published poll (none once it is long gone)."""
    raw = get_redis().get(_polled_key(poll))
    return frozenset(array("q", raw)) if raw else frozenset()
