"""Websocket consumers: authenticate, join groups, forward. No logic beyond that."""

import time

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.conf import settings
from django.contrib.auth.models import User

from dashboard.push import shard_group, trace_group
from fleet.models import Device
from fleet.sharding import shard_of_host

# Close codes in the private range (4000-4999), mirroring HTTP statuses.
CLOSE_UNAUTHENTICATED = 4401
CLOSE_FORBIDDEN = 4403
CLOSE_NOT_FOUND = 4404


class FleetEventsConsumer(AsyncJsonWebsocketConsumer):
    """Base: only signed-in users who may view the fleet get a socket, and keep it only
    while that stays true (checked again at most once per poll interval)."""

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


class UnknownPathConsumer(AsyncJsonWebsocketConsumer):
    """Any other websocket path: accepted only to be closed with 4404."""

    async def connect(self):
        await self.accept()
        await self.close(code=CLOSE_NOT_FOUND)


class FleetConsumer(FleetEventsConsumer):
    """/ws/fleet/: every shard's poll, for the fleet page."""

    async def groups_for_connection(self):
        return [shard_group(shard) for shard in range(settings.POLL_SHARDS)]

    async def fleet_polled(self, event):
        if not await self.still_allowed():
            return
        await self.send_json({"type": "fleet.polled", "cycle": event["cycle"], "devices": event["devices"]})


class DeviceConsumer(FleetEventsConsumer):
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
        for line in event["devices"]:
            if line["id"] == self.device_id:
                await self.send_json({"type": "device.polled", "cycle": event["cycle"], "device": line})
                return


class TraceConsumer(FleetEventsConsumer):
    """/ws/traces/<id>/: a trace's progress and state changes."""

    permission = "traces.view_trace"

    async def groups_for_connection(self):
        from traces.models import Trace

        trace_id = self.scope["url_route"]["kwargs"]["trace_id"]
        exists = await database_sync_to_async(Trace.objects.filter(pk=trace_id).exists)()
        return [trace_group(trace_id)] if exists else None

    async def trace_changed(self, event):
        if await self.still_allowed():
            await self.send_json(event)

    async def trace_progress(self, event):
        if await self.still_allowed():
            await self.send_json(event)
