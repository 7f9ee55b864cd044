from django.urls import path

from dashboard import consumers

websocket_urlpatterns = [
    path("ws/fleet/", consumers.FleetConsumer.as_asgi()),
    path("ws/devices/<int:device_id>/", consumers.DeviceConsumer.as_asgi()),
]
