"""The fleet app's one talker to the channel layer: typed payloads, one per event type.

The poll calls these after its writes; the fleet's websocket consumers (fleet/consumers.py)
forward what arrives. A poll of a shard produces exactly one message, whatever the number
of devices and counters. The message names the polled devices, and each consumer reads
the latest snapshots of the few it shows (`latest_lines`): a page's socket never carries,
nor decodes, the fleet.
"""

import uuid
from typing import Literal, TypedDict

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

from fleet.polling import snapshots
from fleet.reading.key_counters import key_counter_names


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
    ids: list[int]  # the devices polled; their lines are their snapshots (`latest_lines`)


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


def shard_polled(shard: int, cycle: float, device_ids: list[int]) -> None:
    """Publishes a shard's poll, written before (snapshots and health index included)."""
    message: ShardPolled = {
        "type": "fleet.polled",
        "poll": uuid.uuid4().hex,
        "shard": shard,
        "cycle": cycle,
        "ids": list(device_ids),
    }
    async_to_sync(get_channel_layer().group_send)(shard_group(shard), message)
