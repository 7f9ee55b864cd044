"""Pages. Each view reads through fleet.queries and renders; no logic here."""

from django.conf import settings
from django.contrib.auth.decorators import login_required, permission_required
from django.http import HttpResponseBadRequest
from django.shortcuts import get_object_or_404, render

from dashboard.charts import device_figures
from dashboard.forms import FleetFilterForm
from fleet import queries
from fleet.choices import Health
from fleet.models import Automation, Device


@login_required
@permission_required("fleet.view_device", raise_exception=True)
def fleet(request):
    form = FleetFilterForm(request.GET)
    if not form.is_valid():
        errors = "; ".join(f"{field}: {' '.join(messages)}" for field, messages in form.errors.items())
        return HttpResponseBadRequest(f"Bad filter: {errors}", content_type="text/plain")
    filters = form.cleaned_data
    overview = queries.fleet_overview(host=filters["host"], device_type=filters["type"], health=filters["health"])
    return render(
        request,
        "dashboard/fleet.html",
        {"overview": overview, "filters": filters, "health_choices": Health.choices, "automation": Automation.read()},
    )


@login_required
@permission_required("fleet.view_device", raise_exception=True)
def device(request, device_id: int):
    device = get_object_or_404(Device.objects.select_related("host"), pk=device_id)
    detail = queries.device_detail(device)
    events, actions = queries.device_activity(device)
    return render(
        request,
        "dashboard/device.html",
        {
            "device": device,
            "events": events,
            "actions": actions,
            "figures": device_figures(detail.history, gap_s=2.5 * settings.POLL_INTERVAL, snapshot=detail.snapshot),
            "counters": detail.counters,
            "snapshot": detail.snapshot,
            "assessment": detail.assessment,
        },
    )
