"""The pages of a trace's requests: the slowest with their reasons, and one request with its
spans over the engine steps and kernels that served it. They read the stored join (the
page script fetches the rest from the API)."""

from django.contrib.auth.decorators import login_required, permission_required
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_safe

from traces.models import Trace
from traces.requests import reading, service


def _state(fn, *args):
    """(data, problem, status): "pending:…" while the join is made; 503 when the stored one
    could not be read and is made again."""
    try:
        return fn(*args), "", 200
    except service.Unreadable as exc:
        return None, f"pending:{exc}", 503
    except service.Pending as exc:
        return None, f"pending:{exc}", 200
    except (reading.NotJoined, reading.UnknownRequest) as exc:
        return None, str(exc), 404 if isinstance(exc, reading.UnknownRequest) else 200


def _page(request, template: str, context: dict, problem: str, status: int):
    response = render(request, template, context | {
        "pending": problem.startswith("pending:"), "problem": problem.removeprefix("pending:"), "rejoining": status == 503,
    }, status=status)
    if status == 503:
        response["Retry-After"] = str(service.RETRY_AFTER_S)
    return response


@login_required
@permission_required("traces.view_trace", raise_exception=True)
@require_safe
def requests_page(request, trace_id: int):
    trace = get_object_or_404(Trace, pk=trace_id)
    data, problem, status = _state(reading.summary, trace, {"limit": 200})
    return _page(request, "traces/requests.html", {"trace": trace, "data": data}, problem, status)


@login_required
@permission_required("traces.view_trace", raise_exception=True)
@require_safe
def request_page(request, trace_id: int, request_id: str):
    trace = get_object_or_404(Trace, pk=trace_id)
    row, problem, status = _state(reading.find_row, trace, request_id)
    return _page(request, "traces/request.html", {"trace": trace, "row": row, "request_id": request_id},
                 problem, status)
