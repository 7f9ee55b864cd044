"""The replay page: upload a fault history, watch its replay's progress, read its figures
and charts (docs/replay.md)."""

from __future__ import annotations

import re

from django.contrib.auth.decorators import login_required, permission_required
from django.http import JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_safe

from emulator.replay.history import HistoryError
from fleet.replay import runs as replays

__all__ = ["replay_page", "replay_status"]

ID = re.compile(r"^[0-9a-f]{32}$")


def _int(request, name: str, default: int) -> int:
    raw = request.POST.get(name, "").strip()
    if not raw:
        return default
    try:
        return int(raw)
    except ValueError:
        raise replays.ReplayError(f"{name}: {raw!r} is not a whole number") from None


@login_required
@permission_required("fleet.view_device", raise_exception=True)
@require_http_methods(["GET", "HEAD", "POST"])
def replay_page(request):
    rid = request.GET.get("id", "")
    context = {"id": rid if ID.match(rid) else ""}
    if request.method == "POST":
        upload = request.FILES.get("history")
        try:
            if upload is None:
                raise replays.ReplayError("choose a history file (JSON or CSV)")
            if upload.size > replays.MAX_BYTES:
                raise replays.ReplayError(f"{upload.name}: {upload.size:,} bytes, at most {replays.MAX_BYTES:,}")
            rid = replays.start(upload.name, upload.read(), _int(request, "nodes", 400),
                                _int(request, "devices_per_node", 8), request.POST.get("jobs", "").strip() or "128,8x30",
                                settings=request.POST.get("settings", ""), tune=request.POST.get("tune") == "on")
        except (HistoryError, ValueError) as exc:
            return render(request, "fleet/replay.html", {**context, "error": str(exc), "form": request.POST}, status=400)
        return redirect(f"{reverse('fleet:replay')}?id={rid}")
    return render(request, "fleet/replay.html", context)


@login_required
@permission_required("fleet.view_device", raise_exception=True)
@require_safe
def replay_status(request, rid: str):
    found = replays.status(rid) if ID.match(rid) else None
    if found is None:
        return JsonResponse({"error": "no such replay (or it expired)"}, status=404)
    return JsonResponse(found)
