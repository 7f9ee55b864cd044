"""The fleet's websocket consumers: authenticate, join groups, forward. No logic beyond that.

`SignedInConsumer` is the base of every consumer of the project (the traces app's too): a
socket only for a signed-in user with the consumer's permission, for as long as that holds.
"""

import asyncio
import json
import time

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.conf import settings
from django.contrib.auth.models import User
from django.contrib.sessions.backends.db import SessionStore as DatabaseSession
from django.urls import path

from fleet.fanout import Poll, fanout
from fleet.models import Device
from fleet.reading import queries

# Close codes in the private range (4000-4999), mirroring HTTP statuses.
CLOSE_UNAUTHENTICATED = 4401
CLOSE_FORBIDDEN = 4403
CLOSE_NOT_FOUND = 4404

MAX_SUBSCRIBED = max(queries.PAGE_SIZES)


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
        entry = _access[key] = (now, loop.create_task(batched_refusal(consumer)))
    try:
        return entry[0], await asyncio.shield(entry[1])
    except Exception:
        if _access.get(key) is entry:
            del _access[key]  # a failed check is not shared: the next event checks again
        raise


# The checks asked for in one turn of an event loop (a poll's pages, say) run together in one
# thread with a few queries: one per socket, 100 sockets took 150-500 ms of a poll's delivery.
_pending: dict[asyncio.AbstractEventLoop, list[tuple[SignedInConsumer, asyncio.Future]]] = {}


async def batched_refusal(consumer: SignedInConsumer) -> int | None:
    """``consumer.refusal()``, decided with the other checks asked in the same turn."""
    loop = asyncio.get_running_loop()
    batch = _pending.get(loop)
    if batch is None:
        batch = _pending[loop] = []
        loop.call_soon(lambda: loop.create_task(_run_batch(_pending.pop(loop))))
    future = loop.create_future()
    batch.append((consumer, future))
    return await future


async def _run_batch(batch: list[tuple[SignedInConsumer, asyncio.Future]]) -> None:
    try:
        decided = await database_sync_to_async(refusals, thread_sensitive=False)([c for c, _ in batch])
    except Exception as error:
        for _, future in batch:
            if not future.done():
                future.set_exception(error)
        return
    for (_, future), refusal in zip(batch, decided, strict=True):
        if not future.done():
            future.set_result(refusal)


def refusals(sockets: list[SignedInConsumer]) -> list[int | None]:
    """The `refusal()` of each socket, in a query for the sessions, one for the active users
    and one per permission asked, whatever their number. A socket whose class decides apart
    (its own `refusal`), or whose session store is not the database's, is asked alone."""
    one_backend = len(settings.AUTHENTICATION_BACKENDS) == 1  # `with_perm` asks it alone
    simple = {
        id(c) for c in sockets
        if one_backend and type(c).refusal is SignedInConsumer.refusal
        and c.scope.get("session").__class__ is DatabaseSession  # through channels' lazy wrapper
    }
    decided = {id(c): c.refusal() for c in sockets if id(c) not in simple}
    signed_in = {
        id(c): c for c in sockets
        if id(c) in simple and c.scope.get("user") is not None and c.scope["user"].is_authenticated
    }
    keys = {c.scope["session"].session_key for c in signed_in.values()} - {None}
    sessions = DatabaseSession.get_model_class().objects.filter(session_key__in=keys)
    live = set(sessions.values_list("session_key", flat=True)) if keys else set()
    users = {c.scope["user"].pk for c in signed_in.values()}
    active = set(User.objects.filter(pk__in=users, is_active=True).values_list("pk", flat=True)) if users else set()
    permitted = {
        permission: set(User.objects.with_perm(permission).filter(pk__in=active).values_list("pk", flat=True))
        for permission in {c.permission for c in signed_in.values()}
    }
    for c in (c for c in sockets if id(c) in simple):
        user, session = c.scope.get("user"), c.scope["session"]
        if id(c) not in signed_in or session.session_key not in live or user.pk not in active:
            decided[id(c)] = CLOSE_UNAUTHENTICATED
        else:
            decided[id(c)] = None if user.pk in permitted[c.permission] else CLOSE_FORBIDDEN
    return [decided[id(c)] for c in sockets]


class PolledConsumer(SignedInConsumer):
    """A page fed by its process's poll listener (fleet/fanout.py): the socket joins no
    group of its own, so a poll costs the channel layer one delivery per web process
    whatever the number of its pages, and the listener sends each page its message."""

    visible: frozenset[int] = frozenset()
    wants_summary = False
    listening = False

    async def groups_for_connection(self):
        return []

    async def connect(self):
        await super().connect()
        if self.checked_at:  # accepted and kept (a refused socket has no check time)
            self.listening = True
            await fanout().join(self)

    async def disconnect(self, code):
        if self.listening:
            self.listening = False
            await fanout().leave(self)
        await super().disconnect(code)

    def access_due(self) -> bool:
        return time.monotonic() - self.checked_at >= settings.POLL_INTERVAL * 0.5

    async def message_for(self, poll: Poll) -> str | None:
        raise NotImplementedError


class FleetConsumer(PolledConsumer):
    """/ws/fleet/: the fleet page. Per shard poll it gets the lines of the devices the page
    shows, and the fleet's summary when it changed: not the whole fleet.

    The page says which rows it shows with ``{"type": "subscribe", "devices": [ids]}``;
    until it does, they are the first page of the default table. What a poll costs a web
    process grows with its open pages' rows, not with pages times the fleet: the poll's
    devices, the lines of every open page's rows and the summary are each read and encoded
    once per process, and each page's message is put together from them."""

    wants_summary = True
    sent_summary: dict | None = None

    async def groups_for_connection(self):
        self.visible = frozenset(await database_sync_to_async(queries.first_page_ids)())
        return []

    async def receive(self, text_data=None, bytes_data=None, **kwargs):
        devices = subscribed_devices(text_data)
        if isinstance(devices, str):
            await self.send_json({"type": "error", "error": devices})
            return
        self.visible = frozenset(devices)
        await self.send_json({"type": "subscribed", "devices": len(self.visible)})

    async def message_for(self, poll: Poll) -> str | None:
        lines = await poll.lines_of(sorted(self.visible & poll.ids))
        head = json.dumps({"type": "fleet.polled", "shard": poll.shard, "cycle": poll.cycle})[:-1]
        text = f'{head}, "devices": [{", ".join(lines)}]'
        if poll.summary is not None and poll.summary != self.sent_summary:
            self.sent_summary = poll.summary
            text += f', "summary": {poll.summary_text}'
        elif not lines:
            return None
        return text + "}"


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


class DeviceConsumer(PolledConsumer):
    """/ws/devices/<id>/: one device's line of its shard's poll."""

    async def groups_for_connection(self):
        self.device_id = self.scope["url_route"]["kwargs"]["device_id"]
        exists = await database_sync_to_async(Device.objects.filter(pk=self.device_id).exists)()
        if not exists:
            return None
        self.visible = frozenset([self.device_id])
        return []

    async def message_for(self, poll: Poll) -> str | None:
        if self.device_id not in poll.ids:
            return None
        lines = await poll.lines_of([self.device_id])
        if not lines:
            return None
        head = json.dumps({"type": "device.polled", "cycle": poll.cycle})[:-1]
        return f'{head}, "device": {lines[0]}}}'


websocket_urlpatterns = [
    path("ws/fleet/", FleetConsumer.as_asgi()),
    path("ws/devices/<int:device_id>/", DeviceConsumer.as_asgi()),
]
