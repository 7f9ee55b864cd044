"""The fleet's websocket consumers: authenticate, join groups, forward. No logic beyond that.

`SignedInConsumer` is the base of every consumer of the project (the traces app's too): a
socket only for a signed-in user with the consumer's permission, for as long as that holds.
"""

import asyncio
import json
import time

from asgiref.sync import sync_to_async
from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.conf import settings
from django.contrib.auth.models import User
from django.db import DatabaseError
from django.urls import path
from redis.exceptions import RedisError

from fleet.events import latest_lines, shard_group
from fleet.health import index as health_index
from fleet.models import Device
from fleet.polling.sharding import shard_of_host
from fleet.reading import queries

# Close codes in the private range (4000-4999), mirroring HTTP statuses.
CLOSE_UNAUTHENTICATED = 4401
CLOSE_FORBIDDEN = 4403
CLOSE_NOT_FOUND = 4404

MAX_SUBSCRIBED = max(queries.PAGE_SIZES)
TRANSIENT_ERRORS = (OSError, DatabaseError, RedisError)


class SignedInConsumer(AsyncJsonWebsocketConsumer):
    """Base: only signed-in users with ``permission`` get a socket, and keep it only while
    that stays true (checked again at most once per poll interval)."""

    joined: list[str]
    permission = "fleet.view_device"
    checked_at = 0.0

    async def connect(self):
        self.joined = []
        refusal = await database_sync_to_async(self.refusal)()
        groups = None if refusal else await self.groups_for_connection()
        # Accept, then close: a close before the handshake reaches the browser as 1006,
        # and only a close after it carries the reason (the page stops reconnecting).
        await self.accept()
        if refusal or groups is None:
            await self.close(code=refusal or CLOSE_NOT_FOUND)
            return
        for group in groups:
            await self.channel_layer.group_add(group, self.channel_name)
        self.joined = groups
        self.checked_at = time.monotonic()

    async def disconnect(self, code):
        for group in self.joined:
            await self.channel_layer.group_discard(group, self.channel_name)

    def refusal(self) -> int | None:
        """The close code for a user who may not (or no longer) listen; None if they may.
        Reads the session and the user afresh: signing out, deactivation and a lost
        permission all count."""
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            return CLOSE_UNAUTHENTICATED
        session = self.scope.get("session")
        if session is not None and (session.session_key is None or not session.exists(session.session_key)):
            return CLOSE_UNAUTHENTICATED
        fresh = User.objects.filter(pk=user.pk, is_active=True).first()
        if fresh is None:
            return CLOSE_UNAUTHENTICATED
        return None if fresh.has_perm(self.permission) else CLOSE_FORBIDDEN

    async def still_allowed(self) -> bool:
        """Called before forwarding an event: closes the socket of a user who lost access."""
        now = time.monotonic()
        if now - self.checked_at < settings.POLL_INTERVAL * 0.5:
            return True
        self.checked_at = now
        refusal = await database_sync_to_async(self.refusal)()
        if refusal:
            await self.close(code=refusal)
            return False
        return True

    async def groups_for_connection(self) -> list[str] | None:
        raise NotImplementedError

    async def receive(self, text_data=None, bytes_data=None, **kwargs):
        """A socket that only forwards: whatever the page sends is answered, never acted on
        (not parsed either: a text that is not JSON must not kill the consumer)."""
        await self.send_json({"type": "error", "error": "this socket takes no messages"})


class FleetConsumer(SignedInConsumer):
    """/ws/fleet/: the fleet page. Per shard poll it sends the lines of the devices the page
    shows, and the fleet's summary when it changed: not the whole fleet.

    The page says which rows it shows with ``{"type": "subscribe", "devices": [ids]}``;
    until it does, they are the first page of the default table."""

    visible: frozenset[int] = frozenset()
    sent_summary: dict | None = None

    async def groups_for_connection(self):
        self.visible = frozenset(await database_sync_to_async(queries.first_page_ids)())
        return [shard_group(shard) for shard in range(settings.POLL_SHARDS)]

    async def receive(self, text_data=None, bytes_data=None, **kwargs):
        devices = subscribed_devices(text_data)
        if isinstance(devices, str):
            await self.send_json({"type": "error", "error": devices})
            return
        self.visible = frozenset(devices)
        await self.send_json({"type": "subscribed", "devices": len(self.visible)})

    async def fleet_polled(self, event):
        if not await self.still_allowed():
            return
        shown = [device_id for device_id in event["ids"] if device_id in self.visible]
        lines = await lines_of(shown)
        message = {"type": "fleet.polled", "shard": event["shard"], "cycle": event["cycle"], "devices": lines}
        summary = await shared_summary(event["poll"])
        if summary is not None and summary != self.sent_summary:
            message["summary"] = self.sent_summary = summary
        if lines or "summary" in message:
            await self.send_json(message)


async def lines_of(device_ids: list[int]) -> list:
    """The poll lines of a few devices, from their latest snapshots (none on a Redis hiccup:
    the next poll brings them)."""
    if not device_ids:
        return []
    try:
        return await sync_to_async(latest_lines, thread_sensitive=False)(device_ids)
    except TRANSIENT_ERRORS:
        return []


def subscribed_devices(text: str | None) -> list[int] | str:
    """The device ids of a subscribe message, or what is wrong with it."""
    try:
        content = json.loads(text or "")
    except ValueError:
        return "not JSON"
    if not isinstance(content, dict) or content.get("type") != "subscribe":
        return 'expected {"type": "subscribe", "devices": [ids]}'
    devices = content.get("devices")
    if not isinstance(devices, list) or not all(type(i) is int for i in devices):
        return "devices: a list of device ids"
    if len(devices) > MAX_SUBSCRIBED:
        return f"devices: at most {MAX_SUBSCRIBED}"
    return devices


# The fleet's summary, computed once per poll message and process, whatever the number of
# fleet pages open: poll id -> the task computing it. Tied to one event loop.
_summaries: dict[str, asyncio.Task] = {}
_summaries_loop: list = [None]


async def shared_summary(poll: str) -> dict | None:
    loop = asyncio.get_running_loop()
    if _summaries_loop[0] is not loop:
        _summaries.clear()
        _summaries_loop[0] = loop
    task = _summaries.get(poll)
    if task is None:
        task = _summaries[poll] = loop.create_task(database_sync_to_async(_summary)())
        while len(_summaries) > 4 * settings.POLL_SHARDS:
            _summaries.pop(next(iter(_summaries)))
    try:
        return await asyncio.shield(task)
    except TRANSIENT_ERRORS:
        _summaries.pop(poll, None)
        return None  # Redis or the database hiccuped: the next poll brings the summary


def _summary() -> dict:
    return queries.fleet_summary(health_index.read()).to_json()


class DeviceConsumer(SignedInConsumer):
    """/ws/devices/<id>/: one device's line of its shard's poll."""

    async def groups_for_connection(self):
        self.device_id = self.scope["url_route"]["kwargs"]["device_id"]
        host_id = await database_sync_to_async(self._host_of_device)()
        if host_id is None:
            return None
        return [shard_group(shard_of_host(host_id))]

    def _host_of_device(self) -> int | None:
        return Device.objects.filter(pk=self.device_id).values_list("host_id", flat=True).first()

    async def fleet_polled(self, event):
        if not await self.still_allowed() or self.device_id not in event["ids"]:
            return
        for line in await lines_of([self.device_id]):
            await self.send_json({"type": "device.polled", "cycle": event["cycle"], "device": line})


websocket_urlpatterns = [
    path("ws/fleet/", FleetConsumer.as_asgi()),
    path("ws/devices/<int:device_id>/", DeviceConsumer.as_asgi()),
]
