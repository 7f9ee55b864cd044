"""`GET /metrics` for Prometheus: a bearer token, no session."""

import hmac

from django.conf import settings
from django.http import HttpResponse
from django.views.decorators.http import require_GET
from prometheus_client import CONTENT_TYPE_LATEST

from fleet import metrics

OFF_MESSAGE = (
    "/metrics is off: set METRICS_TOKEN to a secret and give Prometheus the same value as its "
    "bearer token (scrape_configs: authorization: {credentials: ...}).\n"
)


@require_GET
def prometheus_metrics(request):
    token = settings.METRICS_TOKEN
    if not token:
        return HttpResponse(OFF_MESSAGE, status=503, content_type="text/plain")
    sent = request.headers.get("Authorization", "")
    scheme, _, credentials = sent.partition(" ")
    if scheme.lower() != "bearer" or not hmac.compare_digest(credentials.strip().encode(), token.encode()):
        response = HttpResponse("A valid 'Authorization: Bearer <METRICS_TOKEN>' header is required.\n",
                                status=401, content_type="text/plain")
        response["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return response
    return HttpResponse(metrics.render(), content_type=CONTENT_TYPE_LATEST)
