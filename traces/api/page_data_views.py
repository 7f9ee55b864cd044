"""The API of the trace page's analyses: findings, flame, timeline windows, event details,
critical path, correlation, metrics around a capture, comparison of two traces, software
versions.
Read-only; viewers may read. Thin: every answer comes from traces.store.page_data, i.e. from stored
files."""

from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.response import Response
from rest_framework.views import APIView

from fleet.api import params
from traces.api.permissions import CanViewTraces
from traces.api.views import NotReady, ready_trace
from traces.atrace.analysis.advice import RULES
from traces.atrace.analysis.comparison import LEVELS, RANKS
from traces.models import Trace
from traces.store import page_data

BAD = OpenApiResponse(description="A bad parameter: the message says which and why")
NOT_READY = OpenApiResponse(description="The trace is not ready (its status and error say why)")


def _answer(fn, *args, **kwargs) -> Response:
    try:
        return Response(fn(*args, **kwargs))
    except page_data.BadRequest as exc:
        raise ValidationError({"detail": str(exc)}) from None
    except page_data.PageDataMissing as exc:
        raise NotReady(str(exc)) from None


def _ready(pk: int) -> Trace:
    return ready_trace(get_object_or_404(Trace, pk=pk))


class AnalysisView(APIView):
    permission_classes = [CanViewTraces]


class FindingsView(AnalysisView):
    @extend_schema(
        summary="What to fix: the advisor's findings",
        description="The verdict in one line (host-, device-, communication- or input-bound, or "
        "mixed) and the findings by estimated saving: rule, severity, title, saving (an upper bound "
        "on the critical path, µs and share of it), what was measured, the evidence (event indices, "
        "steps, time windows, operators, the window to open the timeline at) and the next action.",
        parameters=[
            OpenApiParameter("rule", str, enum=list(RULES), description="One rule's finding only"),
            OpenApiParameter("top", int, description="The N largest findings only"),
        ],
        responses={200: OpenApiTypes.OBJECT, 400: BAD, 409: NOT_READY},
    )
    def get(self, request, pk: int):
        return _answer(page_data.findings, _ready(pk), request.query_params)


class FlameView(AnalysisView):
    @extend_schema(
        summary="Flame (icicle) of a trace",
        description="Call paths aggregated: host stacks, and accelerator work under the host "
        "path that launched it. Columnar: ids, labels, parents, values_us (total), self_us, counts.",
        parameters=[OpenApiParameter("side", str, enum=list(page_data.SIDES), description="One side only (default both)")],
        responses={200: OpenApiTypes.OBJECT, 400: BAD, 409: NOT_READY},
    )
    def get(self, request, pk: int):
        return _answer(page_data.flame, _ready(pk), request.query_params.get("side", ""))


class TimelineView(AnalysisView):
    @extend_schema(
        summary="Timeline window",
        description="The bars of one window for a view width_px wide: at most 5,000, events "
        "narrower than a pixel merged (count says how many), critical-path bars marked "
        "(critical = how many path events a bar holds), the path's edges in the window.",
        parameters=[
            OpenApiParameter("start_us", float, description="Window start, µs on the trace clock (default: trace start)"),
            OpenApiParameter("end_us", float, description="Window end (default: trace end)"),
            OpenApiParameter("width_px", int, description="Pixels across (1–20000, default 1600)"),
        ],
        responses={200: OpenApiTypes.OBJECT, 400: BAD, 409: NOT_READY},
    )
    def get(self, request, pk: int):
        return _answer(page_data.timeline, _ready(pk), request.query_params)


class EventView(AnalysisView):
    @extend_schema(
        summary="One event's details",
        description="Name, kind, times, lane, critical-path mark, correlation id, launched by / "
        "launched, and its args.",
        responses={200: OpenApiTypes.OBJECT, 400: BAD, 409: NOT_READY},
    )
    def get(self, request, pk: int, index: int):
        return _answer(page_data.event, _ready(pk), index)


class CriticalPathView(AnalysisView):
    @extend_schema(
        summary="Critical-path table",
        description="Per operator type: time on the path and share of it, instances on and off "
        "the path, least and median slack off it; the events off the path with the least slack, "
        "and the same grouped by operator without zero-length events (least_slack_by_op). The "
        "steps and the valid steps are listed.",
        parameters=[OpenApiParameter("step", str, description="A valid step (name, or its number); default the whole trace")],
        responses={200: OpenApiTypes.OBJECT, 400: BAD, 409: NOT_READY},
    )
    def get(self, request, pk: int):
        return _answer(page_data.critical_path, _ready(pk), request.query_params.get("step", ""))


class CorrelationView(AnalysisView):
    @extend_schema(
        summary="Host/accelerator correlation",
        description="Launch-to-start latency histogram, device-bound / device-busy / host-bound "
        "/ idle shares over time, idle gaps per accelerator stream.",
        responses={200: OpenApiTypes.OBJECT, 409: NOT_READY},
    )
    def get(self, request, pk: int):
        return _answer(page_data.correlation, _ready(pk))


class MetricsView(AnalysisView):
    @extend_schema(
        summary="The device's counters around a capture",
        description="Utilization, temperature, power and memory of the captured device over the "
        "capture window and a minute either side ([epoch µs, value] pairs, every sample, from the "
        "time-series store). When the store does not answer the series are empty and `unavailable` "
        "says why (null otherwise).",
        responses={200: OpenApiTypes.OBJECT, 400: BAD, 409: NOT_READY},
    )
    def get(self, request, pk: int):
        return _answer(page_data.metrics, _ready(pk))


def _trace_param(query, name: str) -> Trace:
    raw = query.get(name, "")
    if not raw:
        raise ValidationError({name: "required: a trace id."})
    trace_id = params.database_int(raw, name, "a trace id")
    trace = Trace.objects.filter(pk=trace_id).first()
    if trace is None:
        raise NotFound(f"No trace with id {trace_id} ({name}).")
    return ready_trace(trace)


class ComparisonView(AnalysisView):
    @extend_schema(
        summary="Compare two traces",
        description="Per operator type: counts, totals and the delta B − A, ranked by impact on "
        "the total (or the critical path); new and vanished operators; the critical-path "
        "difference. Operator level by default: Python frames and annotations left out, "
        "synchronisation waits listed apart.",
        parameters=[
            OpenApiParameter("a", int, required=True, description="Trace id (the baseline)"),
            OpenApiParameter("b", int, required=True, description="Trace id (compared with a)"),
            OpenApiParameter("level", str, enum=list(LEVELS)),
            OpenApiParameter("rank", str, enum=list(RANKS)),
        ],
        responses={200: OpenApiTypes.OBJECT, 400: BAD, 404: BAD, 409: NOT_READY},
    )
    def get(self, request):
        q = request.query_params
        a, b = _trace_param(q, "a"), _trace_param(q, "b")
        level, rank = q.get("level") or "operator", q.get("rank") or "total"
        return _answer(page_data.comparison, a, b, level=level, rank=rank)


class VersionsView(AnalysisView):
    @extend_schema(
        summary="Software versions of one workload on one device type",
        description="Per operator: the mean across the traces of each version, and the change "
        "from each version to the next, flagged when it exceeds the spread between traces of "
        "one version. Without both parameters: the (workload, type) pairs there are, only "
        "those of the one given if one is.",
        parameters=[OpenApiParameter("workload", str), OpenApiParameter("type", str, description="Device type")],
        responses={200: OpenApiTypes.OBJECT, 400: BAD},
    )
    def get(self, request):
        q = request.query_params
        if not (q.get("workload") and q.get("type")):
            return Response({"choices": page_data.version_choices(q.get("workload", ""), q.get("type", ""))})
        return _answer(page_data.versions, q.get("workload", ""), q.get("type", ""))
