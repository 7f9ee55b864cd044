"""Trace pages: the catalogue, an upload, a trace, the comparison of two and the software
versions of a workload. Each view reads and renders; the page scripts fetch the API for the
rest."""

from django.contrib.auth.decorators import login_required, permission_required
from django.core.paginator import Paginator
from django.http import HttpResponseBadRequest
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_safe
from rest_framework.exceptions import ValidationError

from traces import writers
from traces.api.views import ORDERINGS, filter_traces
from traces.choices import TraceSource, TraceStatus
from traces.jobs.results import job_page
from traces.models import Job, Trace
from traces.store import page_data
from traces.store.files import ResultUnreadable

PAGE_SIZE = 50
TOP_DELTAS = 15  # bars in the comparison's chart of largest deltas
MAX_ROWS = 200  # rows of the comparison's table
FILTERS = ("q", "by", "device", "host", "type", "sw_version", "source", "status")


@login_required
@permission_required("traces.view_trace", raise_exception=True)
@require_safe
def catalogue(request):
    try:
        traces = filter_traces(Trace.objects.for_catalogue(), request.GET)
    except ValidationError as exc:
        errors = "; ".join(f"{k}: {' '.join(map(str, v))}" for k, v in exc.detail.items())
        return HttpResponseBadRequest(f"Bad filter: {errors}", content_type="text/plain")
    page = Paginator(traces, PAGE_SIZE).get_page(request.GET.get("page"))
    choices = Trace.objects.values_list
    return render(request, "traces/catalogue.html", {
        "page": page,
        "filters": {k: request.GET.get(k, "") for k in FILTERS},
        "ordering": request.GET.get("ordering", "-created_at"),
        "orderings": ORDERINGS,
        "hosts": choices("host_name", flat=True).exclude(host_name="").distinct().order_by("host_name"),
        "types": choices("device_type", flat=True).exclude(device_type="").distinct().order_by("device_type"),
        "versions": choices("sw_version", flat=True).exclude(sw_version="").distinct().order_by("sw_version"),
        "sources": TraceSource.choices,
        "statuses": TraceStatus.choices,
        "query": request.GET.copy(),
    })


@login_required
@permission_required("traces.upload_trace", raise_exception=True)
@require_safe
def upload(request):
    from django.conf import settings

    return render(request, "traces/upload.html", {"max_mb": settings.TRACE_UPLOAD_MAX_MB})


@login_required
@permission_required("traces.view_trace", raise_exception=True)
@require_safe
def detail(request, trace_id: int):
    trace = get_object_or_404(Trace.objects.select_related("device__host", "created_by"), pk=trace_id)
    return render(request, "traces/detail.html", {
        "trace": trace,
        "chrome_ready": writers.chrome_ready(trace),
        "previous": page_data.previous_capture(trace),
        "findings": _stored_findings(trace),
    })


def _stored_findings(trace: Trace) -> dict | None:
    """The findings of a ready trace, drawn with the page itself (None: fetched when ready)."""
    if trace.status != TraceStatus.READY:
        return None
    try:
        return page_data.findings(trace)
    except (page_data.PageDataMissing, ResultUnreadable):  # the panel asks the API, which says why
        return None


def _pick(request, name: str) -> Trace:
    raw = request.GET.get(name, "")
    if not raw.isdigit() or len(raw) > 18:  # past 18 digits no database id (SQLite overflows)
        raise page_data.BadRequest(f"{name}: {'required: a trace id' if not raw else repr(raw[:40]) + ' is not a trace id'}")
    trace = Trace.objects.filter(pk=int(raw)).first()
    if trace is None:
        raise page_data.BadRequest(f"{name}: no trace with id {raw}")
    if trace.status != TraceStatus.READY:
        raise page_data.BadRequest(f"{name}: trace {raw} is {trace.status}, not ready")
    return trace


@login_required
@permission_required("traces.view_trace", raise_exception=True)
@require_safe
def comparison_page(request):
    try:
        a, b = _pick(request, "a"), _pick(request, "b")
        result = page_data.comparison(a, b, level=request.GET.get("level", "operator"), rank=request.GET.get("rank", "total"))
    except (page_data.BadRequest, page_data.PageDataMissing) as exc:
        return render(request, "traces/compare.html", {"error": str(exc)}, status=400)
    chart = sorted(result["rows"][:TOP_DELTAS], key=lambda r: abs(r["delta_us"]))
    return render(request, "traces/compare.html", {
        "a": a, "b": b, "result": result, "rows": result["rows"][:MAX_ROWS],
        "rows_total": len(result["rows"]),
        "chart": {"ops": [f"{r['op']} ({r['side']})" for r in chart], "deltas": [r["delta_us"] for r in chart]},
    })


@login_required
@permission_required("traces.view_trace", raise_exception=True)
@require_safe
def versions(request):
    workload, device_type = request.GET.get("workload", ""), request.GET.get("type", "")
    context = {"choices": page_data.version_choices(), "workload": workload, "type": device_type}
    if workload or device_type:
        try:
            context["result"] = page_data.versions(workload, device_type)
        except page_data.BadRequest as exc:
            return render(request, "traces/versions.html", {**context, "error": str(exc)}, status=400)
    return render(request, "traces/versions.html", context)


# -- distributed jobs ----------------------------------------------------------------------
@login_required
@permission_required("traces.view_trace", raise_exception=True)
@require_safe
def jobs(request):
    from django.conf import settings

    page = Paginator(Job.objects.for_list(), PAGE_SIZE).get_page(request.GET.get("page"))
    return render(request, "traces/jobs.html", {"page": page, "max_mb": settings.TRACE_UPLOAD_MAX_MB})


@login_required
@permission_required("traces.view_trace", raise_exception=True)
@require_safe
def job(request, job_id: int):
    found = get_object_or_404(Job.objects.select_related("created_by", "straggler_device"), pk=job_id)
    return render(request, "traces/job.html", job_page(found))
