"""ASGI entry point: HTTP through Django, websockets through Channels."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dashboard.settings")
# Build the Django app first: routing imports consumers, which import models.
django_asgi_app = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402
from django.urls import get_resolver  # noqa: E402

from dashboard.routing import websocket_urlpatterns  # noqa: E402

# Import every view now, not on the first request: the first click after a start would
# otherwise wait ~0.7 s for the URL configuration, DRF and the views to import.
get_resolver().url_patterns  # noqa: B018

application = ProtocolTypeRouter(
    {
        "http": django_asgi_app,
        "websocket": AllowedHostsOriginValidator(
            AuthMiddlewareStack(URLRouter(websocket_urlpatterns))
        ),
    }
)
