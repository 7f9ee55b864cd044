"""The fleet's pages (each reads through fleet.reading.queries and renders; no logic here) and
`GET /metrics` for Prometheus (a bearer token, no session)."""

import hmac

from django.conf import settings
from django.contrib.auth.decorators import login_required, permission_required
from django.http import HttpResponse, HttpResponseBadRequest
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_GET, require_safe
from prometheus_client import CONTENT_TYPE_LATEST

from fleet.choices import DeviceState, Health
from fleet.driver_errors import views as driver_error_views
from fleet.driver_errors.offenders import device_record
from fleet.forms import FleetFilterForm
from fleet.health import index as health_index
from fleet.models import Automation, Device, Host
from fleet.reading import metrics, queries
from fleet.reading.charts import device_figures, empty_reason
from fleet.tsdb import status as tsdb_status


def _table_query(request):
    """The fleet table's query from the query string, or a 400 saying what is wrong."""
    form = FleetFilterForm(request.GET)
    if not form.is_valid():
        errors = "; ".join(f"{field}: {' '.join(messages)}" for field, messages in form.errors.items())
        return None, HttpResponseBadRequest(f"Bad filter: {errors}", content_type="text/plain")
    return form.table_query(), None


@login_required
@permission_required("fleet.view_device", raise_exception=True)
@require_safe
def fleet(request):
    """Summaries of the whole fleet first, then one page of the device table."""
    query, refusal = _table_query(request)
    if refusal:
        return refusal
    healths = health_index.read()
    return render(
        request,
        "fleet/fleet.html",
        {
            "summary": queries.fleet_summary(healths),
            "table": queries.table_page(query, healths),
            "query": query,
            "types": queries.device_types(),
            "health_choices": Health.choices,
            "state_choices": DeviceState.choices,
            "sorts": list(queries.SORTS),
            "page_sizes": queries.PAGE_SIZES,
            "automation": Automation.read(),
            "spools": tsdb_status.needing_attention() if request.user.is_staff else [],
            "driver_error_counts": driver_error_views.fleet_counts(),
            "agent_hosts": queries.agent_hosts(),
        },
    )


@login_required
@permission_required("fleet.view_device", raise_exception=True)
@require_safe
def fleet_table(request):
    """The device table alone, for the fleet page to swap in when filters or page change."""
    query, refusal = _table_query(request)
    if refusal:
        return refusal
    table = queries.table_page(query, health_index.read())
    return render(request, "fleet/_fleet_table.html", {"table": table, "query": query})


@login_required
@permission_required("fleet.view_device", raise_exception=True)
@require_safe
def device(request, device_id: int):
    device = get_object_or_404(Device.objects.select_related("host"), pk=device_id)
    range_key = request.GET.get("range") or next(iter(queries.DEVICE_RANGES))
    if range_key not in queries.DEVICE_RANGES:
        return HttpResponseBadRequest(
            f"Bad range: one of {', '.join(queries.DEVICE_RANGES)}.", content_type="text/plain"
        )
    detail = queries.device_detail(device, queries.DEVICE_RANGES[range_key][0])
    events, actions = queries.device_activity(device)
    errors = driver_error_views.device_errors(device)
    live = detail.step is None
    window = (detail.since.timestamp(), detail.until.timestamp())
    last_sample = detail.snapshot.get("sample_ts")
    return render(
        request,
        "fleet/device.html",
        {
            "device": device,
            "events": events,
            "actions": actions,
            "figures": device_figures(
                detail.history, gap_s=2.5 * (settings.POLL_INTERVAL if live else detail.step),
                snapshot=detail.snapshot, live=live, window=window,
            ),
            "empty_reason": empty_reason(
                live=live, last_sample_ts=last_sample, since=window[0],
                poll_interval=settings.POLL_INTERVAL, now=window[1],
            ),
            "longer_range": queries.range_reaching(window[1] - last_sample) if last_sample and last_sample < window[0] else None,
            "ranges": [(key, label) for key, (_, label) in queries.DEVICE_RANGES.items()],
            "range": range_key,
            "resolution": detail.resolution,
            "resolution_label": queries.resolution_label(detail.step),
            "history_error": detail.history_error,
            "counters": detail.counters,
            "snapshot": detail.snapshot,
            "assessment": detail.assessment,
            "driver_errors": errors,
            "error_marks": driver_error_views.error_marks(errors),
            "offender": device_record(device.serial),
            "slurm_jobs": device.host.scheduler_jobs_on(device.index),
        },
    )


@login_required
@permission_required("fleet.view_device", raise_exception=True)
@require_safe
def host(request, host_id: int):
    """A host: who polls it, its devices, and (a host with an agent) its PyTorch processes."""
    host = get_object_or_404(Host, pk=host_id)
    return render(request, "fleet/host.html", {"host": host, "devices": queries.host_devices(host)})


# --- /metrics -----------------------------------------------------------------------

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
