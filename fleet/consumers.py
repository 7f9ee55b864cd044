"""The fleet's websocket consumers: authenticate, join groups, forward. No logic beyond that.

`SignedInConsumer` is the base of every consumer of the project (the traces app's too): a
socket only for a signed-in user with the consumer's permission, for as long as that holds.
"""

import asyncio
import json
import time
import weakref

from asgiref.sync import sync_to_async
from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.conf import settings
from django.contrib.auth.models import User
from django.db import DatabaseError
from django.urls import path
from redis.exceptions import RedisError

from fleet.events import latest_lines, polled_ids, shard_group
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
        """Called before forwarding an event: closes the socket of a user who lost access.
        The sockets of one browser session (its tabs) in this process share a check."""
        if time.monotonic() - self.checked_at < settings.POLL_INTERVAL * 0.5:
            return True
        self.checked_at, refusal = await shared_access_check(self)
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


# Access decisions of this process, shared by the sockets of one browser session for as
# long as one socket would keep its own: (user, session, permission) -> (when, the check).
# Tied to one event loop. Checks run in parallel threads: under load, 200 pages' checks
# queued in one thread delayed the last pages' updates past a second.
_access: dict[tuple, tuple[float, asyncio.Task]] = {}
_access_loop: list = [None, 0.0]  # the loop, when stale decisions were last swept


async def shared_access_check(consumer: SignedInConsumer) -> tuple[float, int | None]:
    """When the access of the consumer's session was last decided (monotonic) and the
    decision: `refusal()`, run at most once per half poll interval per session."""
    loop, now = asyncio.get_running_loop(), time.monotonic()
    window = settings.POLL_INTERVAL * 0.5
    if _access_loop[0] is not loop:
        _access.clear()
        _access_loop[:] = [loop, now]
    if now - _access_loop[1] >= window:
        for stale in [k for k, (at, _) in _access.items() if now - at >= window]:
            del _access[stale]
        _access_loop[1] = now
    user, session = consumer.scope.get("user"), consumer.scope.get("session")
    key = (getattr(user, "pk", None), getattr(session, "session_key", None), consumer.permission)
    entry = _access.get(key)
    if entry is None or now - entry[0] >= window or key[0] is None:
        check = database_sync_to_async(consumer.refusal, thread_sensitive=False)()
        entry = _access[key] = (now, loop.create_task(check))
    try:
        return entry[0], await asyncio.shield(entry[1])
    except Exception:
        if _access.get(key) is entry:
            del _access[key]  # a failed check is not shared: the next event checks again
        raise


class FleetConsumer(SignedInConsumer):
    """/ws/fleet/: the fleet page. Per shard poll it sends the lines of the devices the page
    shows, and the fleet's summary when it changed: not the whole fleet.

    The page says which rows it shows with ``{"type": "subscribe", "devices": [ids]}``;
    until it does, they are the first page of the default table. What a poll costs a web
    process grows with its open pages' rows, not with pages times the fleet: the poll's
    devices, the lines of every open page's rows and the summary are each read once per
    process (`per_poll`), and each page takes its rows from them."""

    visible: frozenset[int] = frozenset()
    sent_summary: dict | None = None

    async def groups_for_connection(self):
        self.visible = frozenset(await database_sync_to_async(queries.first_page_ids)())
        return [shard_group(shard) for shard in range(settings.POLL_SHARDS)]

    async def connect(self):
        await super().connect()
        if self.joined:
            _open_pages.add(self)

    async def disconnect(self, code):
        _open_pages.discard(self)
        await super().disconnect(code)

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
        poll = event["poll"]
        shown = sorted(self.visible & await per_poll("ids", poll, polled_of, poll))
        lines = await lines_shown(poll, shown)
        message = {"type": "fleet.polled", "shard": event["shard"], "cycle": event["cycle"], "devices": lines}
        summary = await per_poll("summary", poll, summary_now)
        if summary is not None and summary != self.sent_summary:
            message["summary"] = self.sent_summary = summary
        if lines or "summary" in message:
            await self.send_json(message)


# This process's open fleet pages: a poll's lines are read once for all their rows.
_open_pages: "weakref.WeakSet[FleetConsumer]" = weakref.WeakSet()


async def lines_shown(poll: str, shown: list[int]) -> list:
    """The lines of a page's rows in a poll: from the lines read once for every open page of
    the process, and read apart for rows the page started showing since."""
    if not shown:
        return []
    read = await per_poll("lines", poll, open_pages_lines, poll)
    missing = [device_id for device_id in shown if device_id not in read]
    if missing:
        read = {**read, **{line["id"]: line for line in await lines_of(missing)}}
    return [read[device_id] for device_id in shown if read.get(device_id) is not None]


async def open_pages_lines(poll: str) -> dict[int, dict | None]:
    """The lines of the polled rows of every open page of the process (None for a device
    without a snapshot), by device id."""
    polled = await per_poll("ids", poll, polled_of, poll)
    wanted = sorted(frozenset().union(*(page.visible for page in list(_open_pages))) & polled)
    read: dict[int, dict | None] = dict.fromkeys(wanted)
    read.update((line["id"], line) for line in await lines_of(wanted))
    return read


async def polled_of(poll: str) -> frozenset[int]:
    try:
        return await sync_to_async(polled_ids, thread_sensitive=False)(poll)
    except TRANSIENT_ERRORS:
        return frozenset()  # Redis hiccuped: the next poll brings the rows


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


# What the consumers of a process compute once per poll message, whatever the number of
# fleet pages open: (what, poll id) -> (when asked, the task computing it), kept two poll
# intervals (agents publish a message per host: a count would drop results still wanted).
# Tied to one event loop.
_per_poll: dict[tuple[str, str], tuple[float, asyncio.Task]] = {}
_per_poll_loop: list = [None]


async def per_poll(what: str, poll: str, compute, *args):
    """``compute(*args)``'s result for this poll, computed by the first consumer that asks in
    this process and shared by the others."""
    loop, now = asyncio.get_running_loop(), time.monotonic()
    if _per_poll_loop[0] is not loop:
        _per_poll.clear()
        _per_poll_loop[0] = loop
    entry = _per_poll.get((what, poll))
    if entry is None:
        entry = _per_poll[(what, poll)] = (now, loop.create_task(compute(*args)))
        while now - next(iter(_per_poll.values()))[0] > 2 * settings.POLL_INTERVAL:
            _per_poll.pop(next(iter(_per_poll)))
    return await asyncio.shield(entry[1])


async def summary_now() -> dict | None:
    try:
        return await database_sync_to_async(_summary)()
    except TRANSIENT_ERRORS:
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
        if not await self.still_allowed():
            return
        if self.device_id not in await per_poll("ids", event["poll"], polled_of, event["poll"]):
            return
        for line in await lines_of([self.device_id]):
            await self.send_json({"type": "device.polled", "cycle": event["cycle"], "device": line})


websocket_urlpatterns = [
    path("ws/fleet/", FleetConsumer.as_asgi()),
    path("ws/devices/<int:device_id>/", DeviceConsumer.as_asgi()),
]
