from django.urls import path, re_path

from dashboard import consumers

websocket_urlpatterns = [
    path("ws/fleet/", consumers.FleetConsumer.as_asgi()),
    path("ws/devices/<int:device_id>/", consumers.DeviceConsumer.as_asgi()),
    path("ws/traces/<int:trace_id>/", consumers.TraceConsumer.as_asgi()),
    re_path(r"", consumers.UnknownPathConsumer.as_asgi()),  # anything else: 4404, not a crash
]
