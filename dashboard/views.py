"""Pages. Each view reads through fleet.queries and renders; no logic here."""

from django.contrib.auth.decorators import login_required, permission_required
from django.shortcuts import get_object_or_404, render

from dashboard.charts import device_figures
from fleet import queries, snapshots
from fleet.asicmon import CATALOGUE
from fleet.models import Device


@login_required
@permission_required("fleet.view_device", raise_exception=True)
def fleet(request):
    overview = queries.fleet_overview()
    return render(request, "dashboard/fleet.html", {"overview": overview})


@login_required
@permission_required("fleet.view_device", raise_exception=True)
def device(request, device_id: int):
    device = get_object_or_404(Device.objects.select_related("host"), pk=device_id)
    history = queries.device_history(device, queries.KEY_COUNTERS)
    snapshot = snapshots.read_snapshot(device.id) or {}
    counters = [
        {"name": name, "value": snapshot[name], "unit": CATALOGUE[name].unit, "description": CATALOGUE[name].description}
        for name in sorted(snapshot)
        if name in CATALOGUE
    ]
    return render(
        request,
        "dashboard/device.html",
        {"device": device, "figures": device_figures(history), "counters": counters, "snapshot": snapshot},
    )
