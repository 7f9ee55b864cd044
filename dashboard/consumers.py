"""Websocket consumers: authenticate, join groups, forward. No logic beyond that."""

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.conf import settings

from dashboard.push import shard_group
from fleet.models import Device
from fleet.sharding import shard_of_host

# Close codes in the private range (4000-4999), mirroring HTTP statuses.
CLOSE_UNAUTHENTICATED = 4401
CLOSE_FORBIDDEN = 4403
CLOSE_NOT_FOUND = 4404


class FleetEventsConsumer(AsyncJsonWebsocketConsumer):
    """Base: only signed-in users who may view the fleet get a socket."""

    joined: list[str]

    async def connect(self):
        self.joined = []
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        if not await database_sync_to_async(user.has_perm)("fleet.view_device"):
            await self.close(code=CLOSE_FORBIDDEN)
            return
        groups = await self.groups_for_connection()
        if groups is None:
            await self.close(code=CLOSE_NOT_FOUND)
            return
        for group in groups:
            await self.channel_layer.group_add(group, self.channel_name)
        self.joined = groups
        await self.accept()

    async def disconnect(self, code):
        for group in self.joined:
            await self.channel_layer.group_discard(group, self.channel_name)

    async def groups_for_connection(self) -> list[str] | None:
        raise NotImplementedError


class FleetConsumer(FleetEventsConsumer):
    """/ws/fleet/: every shard's poll, for the fleet page."""

    async def groups_for_connection(self):
        return [shard_group(shard) for shard in range(settings.POLL_SHARDS)]

    async def fleet_polled(self, event):
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
        for line in event["devices"]:
            if line["id"] == self.device_id:
                await self.send_json({"type": "device.polled", "cycle": event["cycle"], "device": line})
                return
