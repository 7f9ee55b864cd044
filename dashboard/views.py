"""Pages. Each view reads through fleet.queries and renders; no logic here."""

from django.contrib.auth.decorators import login_required, permission_required
from django.shortcuts import get_object_or_404, render

from dashboard.charts import device_figures
from fleet import queries
from fleet.models import Device


@login_required
@permission_required("fleet.view_device", raise_exception=True)
def fleet(request):
    return render(request, "dashboard/fleet.html", {"overview": queries.fleet_overview()})


@login_required
@permission_required("fleet.view_device", raise_exception=True)
def device(request, device_id: int):
    device = get_object_or_404(Device.objects.select_related("host"), pk=device_id)
    detail = queries.device_detail(device)
    return render(
        request,
        "dashboard/device.html",
        {
            "device": device,
            "figures": device_figures(detail.history),
            "counters": detail.counters,
            "snapshot": detail.snapshot,
            "assessment": detail.assessment,
        },
    )
