"""The comparison and software-versions pages: thin views over traces.trace_views."""

from django.contrib.auth.decorators import login_required, permission_required
from django.shortcuts import render

from traces import trace_views
from traces.choices import TraceStatus
from traces.models import Trace

TOP_DELTAS = 15  # bars in the chart of largest deltas
MAX_ROWS = 200


def _pick(request, name: str) -> Trace:
    raw = request.GET.get(name, "")
    if not raw.isdigit():
        raise trace_views.BadRequest(f"{name}: {'required: a trace id' if not raw else repr(raw) + ' is not a trace id'}")
    trace = Trace.objects.filter(pk=int(raw)).first()
    if trace is None:
        raise trace_views.BadRequest(f"{name}: no trace with id {raw}")
    if trace.status != TraceStatus.READY:
        raise trace_views.BadRequest(f"{name}: trace {raw} is {trace.status}, not ready")
    return trace


@login_required
@permission_required("traces.view_trace", raise_exception=True)
def compare(request):
    try:
        a, b = _pick(request, "a"), _pick(request, "b")
        result = trace_views.compare(a, b, level=request.GET.get("level", "operator"), rank=request.GET.get("rank", "total"))
    except (trace_views.BadRequest, trace_views.ViewsMissing) as exc:
        return render(request, "traces/compare.html", {"error": str(exc)}, status=400)
    chart = sorted(result["rows"][:TOP_DELTAS], key=lambda r: abs(r["delta_us"]))
    return render(request, "traces/compare.html", {
        "a": a, "b": b, "result": result, "rows": result["rows"][:MAX_ROWS],
        "rows_total": len(result["rows"]),
        "chart": {"ops": [f"{r['op']} ({r['side']})" for r in chart], "deltas": [r["delta_us"] for r in chart]},
    })


@login_required
@permission_required("traces.view_trace", raise_exception=True)
def versions(request):
    workload, device_type = request.GET.get("workload", ""), request.GET.get("type", "")
    context = {"choices": trace_views.version_choices(), "workload": workload, "type": device_type}
    if workload or device_type:
        try:
            context["result"] = trace_views.versions(workload, device_type)
        except trace_views.BadRequest as exc:
            return render(request, "traces/versions.html", {**context, "error": str(exc)}, status=400)
    return render(request, "traces/versions.html", context)
