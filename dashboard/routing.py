"""Websocket routes: each app's, then anything else closed with 4404 (not a crash)."""

from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.urls import re_path

from fleet.consumers import CLOSE_NOT_FOUND
from fleet.consumers import websocket_urlpatterns as fleet_routes
from traces.consumers import websocket_urlpatterns as trace_routes


class UnknownPathConsumer(AsyncJsonWebsocketConsumer):
    """Any other websocket path: accepted only to be closed with 4404."""

    async def connect(self):
        await self.accept()
        await self.close(code=CLOSE_NOT_FOUND)


websocket_urlpatterns = [*fleet_routes, *trace_routes, re_path(r"", UnknownPathConsumer.as_asgi())]
