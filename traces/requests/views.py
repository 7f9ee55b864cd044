"""The pages of a trace's requests: the slowest with their reasons, and one request with its
spans over the engine steps and kernels that served it. They read the stored join (the
page script fetches the rest from the API)."""

from django.contrib.auth.decorators import login_required, permission_required
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_safe

from traces.models import Trace
from traces.requests import reading, service


def _state(fn, *args):
    try:
        return fn(*args), ""
    except service.Pending as exc:
        return None, f"pending:{exc}"
    except (reading.NotJoined, reading.UnknownRequest) as exc:
        return None, str(exc)


@login_required
@permission_required("traces.view_trace", raise_exception=True)
@require_safe
def requests_page(request, trace_id: int):
    trace = get_object_or_404(Trace, pk=trace_id)
    data, problem = _state(reading.summary, trace, {"limit": 200})
    return render(request, "traces/requests.html", {
        "trace": trace, "data": data, "pending": problem.startswith("pending:"),
        "problem": problem.removeprefix("pending:"),
    })


@login_required
@permission_required("traces.view_trace", raise_exception=True)
@require_safe
def request_page(request, trace_id: int, request_id: str):
    trace = get_object_or_404(Trace, pk=trace_id)
    row, problem = _state(reading.find_row, trace, request_id)
    pending = problem.startswith("pending:")
    return render(request, "traces/request.html", {
        "trace": trace, "row": row, "request_id": request_id, "pending": pending,
        "problem": problem.removeprefix("pending:"),
    }, status=404 if problem.startswith("no request") else 200)
