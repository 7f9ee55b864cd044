"""The one place that talks to the channel layer: typed payloads, one per event type.

Workers call these after a write; websocket consumers forward what arrives. A poll
of a shard produces exactly one message, whatever the number of devices and counters.
"""

from typing import TypedDict

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer


class DeviceLine(TypedDict):
    """The compact per-device part of a poll message (key counters only)."""

    id: int
    health: str
    reasons: list[str]
    driver_status: str | None
    device_utilization: float | None
    temperature_c: float | None
    power_w: float | None
    memory_used_bytes: float | None
    memory_total_bytes: float | None
    sample_ts: float | None


class ShardPolled(TypedDict):
    type: str  # "fleet.polled"
    shard: int
    cycle: float
    devices: list[DeviceLine]


def shard_group(shard: int) -> str:
    return f"fleet.shard.{shard}"


def shard_polled(shard: int, cycle: float, devices: list[DeviceLine]) -> None:
    message: ShardPolled = {
        "type": "fleet.polled",
        "shard": shard,
        "cycle": cycle,
        "devices": devices,
    }
    async_to_sync(get_channel_layer().group_send)(shard_group(shard), message)
