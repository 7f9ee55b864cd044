"""ASGI entry point: HTTP through Django (upload routes through the upload gate first),
websockets through Channels."""

import os
import sys

from django.core.asgi import get_asgi_application

from dashboard.memory import limit_malloc_arenas

limit_malloc_arenas()  # before any request's thread allocates (dashboard/memory.py)
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dashboard.settings")
# Build the Django app first: routing imports consumers, which import models.
django_asgi_app = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402
from django.urls import get_resolver  # noqa: E402

from dashboard.gate.upload_gate import UploadGate  # noqa: E402
from dashboard.routing import websocket_urlpatterns  # noqa: E402

if "daphne.server" in sys.modules:  # (always: the daphne app is installed)
    # Daphne stores a whole body before it calls the application: decide on uploads from
    # their headers inside Daphne, before that (dashboard/gate/daphne_gate.py). Under another
    # server this changes nothing, and the UploadGate below decides.
    from dashboard.gate import daphne_gate

    daphne_gate.install()

# Import every view now, not on the first request: the first click after a start would
# otherwise wait ~0.7 s for the URL configuration, DRF and the views to import.
get_resolver().url_patterns  # noqa: B018

application = ProtocolTypeRouter(
    {
        "http": UploadGate(django_asgi_app),
        "websocket": AllowedHostsOriginValidator(
            AuthMiddlewareStack(URLRouter(websocket_urlpatterns))
        ),
    }
)
