"""The traces API: thin views over traces.writers (writes) and traces.store.queries (reads)."""

from django.conf import settings
from django.http import FileResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    extend_schema_view,
)
from rest_framework import status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import APIException, ValidationError
from rest_framework.response import Response
from rest_framework.views import APIView

from fleet.api import params
from fleet.models import Device, Host
from traces import writers
from traces.api.permissions import CanCaptureTraces, CanUploadTraces, CanViewTraces
from traces.api.serializers import (
    BreakdownSerializer,
    CaptureRequestSerializer,
    CreatedSerializer,
    HostCaptureRequestSerializer,
    InstancesSerializer,
    TraceSerializer,
    UploadSerializer,
)
from traces.api.upload_views import Refused, UploadCreate
from traces.choices import TraceSource, TraceStatus
from traces.models import Trace
from traces.processes import requests as process_requests
from traces.store import queries
from traces.store.files import CHROME, TraceFiles

ORDERINGS = ["created_at", "-created_at", "name", "-name", "events", "-events", "span_us", "-span_us", "status", "-status"]
MAX_INSTANCES = 1000


class NotReady(APIException):
    status_code = status.HTTP_409_CONFLICT


def filter_traces(queryset, query):
    """The catalogue's filters (shared by the API list and the page)."""
    if name := query.get("q"):
        queryset = queryset.filter(name__icontains=name)
    if by := query.get("by"):
        queryset = queryset.filter(created_by__username=by)
    if device := query.get("device"):
        try:
            queryset = queryset.filter(device_id=int(device))
        except ValueError:
            raise ValidationError({"device": f"'{device}' is not a device id (an integer)."}) from None
    if host := query.get("host"):
        queryset = queryset.filter(host_name=host)
    if device_type := query.get("type"):
        queryset = queryset.filter(device_type=device_type)
    if sw_version := query.get("sw_version"):
        queryset = queryset.filter(sw_version=sw_version)
    if source := params.parse_choice(query, "source", TraceSource.values):
        queryset = queryset.filter(source=source)
    if state := params.parse_choice(query, "status", TraceStatus.values):
        queryset = queryset.filter(status=state)
    if ordering := params.parse_choice(query, "ordering", ORDERINGS):
        queryset = queryset.order_by(ordering, "-id")
    return queryset


def parse_offset(query) -> int:
    raw = query.get("offset") or "0"
    if not raw.isdigit():
        raise ValidationError({"offset": f"'{raw}' is not a non-negative integer."})
    return params.database_int(raw, "offset")


def ready_trace(trace: Trace) -> Trace:
    if trace.status != TraceStatus.READY:
        reason = f": {trace.error}" if trace.error else ""
        raise NotReady(f"trace {trace.pk} is {trace.status}{reason}; its results are not ready")
    return trace


LIST_PARAMETERS = [
    OpenApiParameter("q", str, description="Name contains (case-insensitive)"),
    OpenApiParameter("by", str, description="User name of who captured or uploaded it"),
    OpenApiParameter("device", int, description="Device id"),
    OpenApiParameter("host", str, description="Host name"),
    OpenApiParameter("type", str, description="Device type"),
    OpenApiParameter("sw_version", str, description="Software version"),
    OpenApiParameter("source", str, enum=TraceSource.values),
    OpenApiParameter("status", str, enum=TraceStatus.values),
    OpenApiParameter("ordering", str, enum=ORDERINGS),
]


@extend_schema_view(list=extend_schema(parameters=LIST_PARAMETERS))
class TraceViewSet(UploadCreate, viewsets.ReadOnlyModelViewSet):
    """Traces: captures and uploads, their status and their analysis results."""

    serializer_class = TraceSerializer
    upload_serializer, files_field, uploads_field = UploadSerializer, "file", "upload"

    def get_permissions(self):
        return [CanUploadTraces()] if self.action == "create" else [CanViewTraces()]

    def perform_content_negotiation(self, request, force=False):
        # download's ?format=raw|chrome names a file format, not one of DRF's renderers.
        return super().perform_content_negotiation(request, force=force or self.action == "download")

    def get_queryset(self):
        if self.action != "list":
            return Trace.objects.select_related("device", "created_by")
        return filter_traces(Trace.objects.for_catalogue(), self.request.query_params)

    @extend_schema(
        parameters=[],
        request={"multipart/form-data": UploadSerializer, "application/json": UploadSerializer},
        responses={201: CreatedSerializer, 400: OpenApiResponse(description="Bad file: the engine's message"),
                   413: OpenApiResponse(description="Too large"), 507: OpenApiResponse(description="Storage full")},
    )
    def create(self, request):
        """Upload a trace: a multipart file, or a finished resumable upload (JSON
        ``{"upload": id}``); its head is checked, it is stored, and a worker analyses it."""
        data, sources, uploads = self.upload_form(request)
        if not sources:
            raise ValidationError({"file": "send a file (multipart field 'file') or a finished upload's id ('upload')."})
        device = None
        if "device" in data:
            device = Device.objects.select_related("host").filter(pk=data["device"]).first()
            if device is None:
                raise ValidationError({"device": f"no device with id {data['device']}."})
        trace = self.made_from(uploads, lambda: writers.accept_upload(
            sources[0], request.user, name=data.get("name", ""), device=device, sw_version=data.get("sw_version", "")))
        return Response(
            {"id": trace.pk, "url": trace.get_absolute_url(), "status": trace.status},
            status=status.HTTP_201_CREATED,
        )

    @extend_schema(
        parameters=[
            OpenApiParameter("side", str, enum=list(queries.SIDES), description="Default host"),
            OpenApiParameter("kind", str, description="Only this kind (host_op, kernel, python, ...)"),
        ],
        responses={200: BreakdownSerializer, 409: OpenApiResponse(description="Not ready")},
    )
    @action(detail=True, methods=["get"])
    def breakdown(self, request, pk=None):
        """Every operator type of one side, by total time (all rows, never cut)."""
        trace = ready_trace(self.get_object())
        side = params.parse_choice(request.query_params, "side", list(queries.SIDES)) or "host"
        data = queries.summary(trace)
        kinds = queries.kinds_by_side(data)[side]
        kind = request.query_params.get("kind") or None
        if kind is not None and kind not in kinds:
            raise ValidationError({"kind": f"'{kind}' is not a kind of the {side} side of this trace; it has: {', '.join(kinds) or 'none'}."})
        rows = queries.breakdown(trace, side, kind)
        return Response({"side": side, "kind": kind, "kinds": kinds, "count": len(rows), "results": rows})

    @extend_schema(
        parameters=[
            OpenApiParameter("op", str, required=True, description="Operator type, from the breakdown"),
            OpenApiParameter("side", str, enum=list(queries.SIDES), description="Default host"),
            OpenApiParameter("kind", str, description="Only this kind"),
            OpenApiParameter("order", str, enum=list(queries.ORDERS), description="Default duration (longest first)"),
            OpenApiParameter("limit", {"type": "integer", "minimum": 1, "maximum": MAX_INSTANCES}, description="Default 50"),
            OpenApiParameter("offset", {"type": "integer", "minimum": 0}, description="Default 0"),
            OpenApiParameter("group_by", str, description="An arg name, e.g. 'Input Dims'"),
        ],
        responses={200: InstancesSerializer, 409: OpenApiResponse(description="Not ready")},
    )
    @action(detail=True, methods=["get"])
    def instances(self, request, pk=None):
        """The drill-down of one operator type: its instances, a histogram, a group-by."""
        trace = ready_trace(self.get_object())
        query = request.query_params
        op = query.get("op")
        if not op:
            raise ValidationError({"op": "op is required: an operator type from the breakdown."})
        q = queries.InstanceQuery(
            side=params.parse_choice(query, "side", list(queries.SIDES)) or "host",
            op=op,
            kind=query.get("kind") or None,
            order=params.parse_choice(query, "order", list(queries.ORDERS)) or "duration",
            limit=params.parse_limit(query, default=50, maximum=MAX_INSTANCES),
            offset=parse_offset(query),
            group_by=query.get("group_by") or None,
        )
        try:
            return Response(queries.instances(trace, q))
        except queries.UnknownOperator as exc:
            raise ValidationError({"op": str(exc)}) from None

    @extend_schema(
        parameters=[OpenApiParameter("format", str, enum=["raw", "chrome"], description="Default raw")],
        responses={(200, "application/octet-stream"): OpenApiTypes.BINARY, 409: OpenApiResponse(description="Not ready")},
    )
    @action(detail=True, methods=["get"])
    def download(self, request, pk=None):
        """The raw trace as stored, or Chrome trace JSON with the critical path marked."""
        trace = self.get_object()
        fmt = params.parse_choice(request.query_params, "format", ["raw", "chrome"]) or "raw"
        files = TraceFiles(trace.pk)
        if fmt == "raw":
            if not trace.raw_file:
                raise NotReady(f"trace {trace.pk} has no raw file yet ({trace.status})")
            filename = f"trace-{trace.pk}-{trace.raw_file.rsplit('/', 1)[-1]}"
            url = files.download_url(trace.raw_file, settings.TRACE_S3_REDIRECT_MB << 20, filename)
            if url:
                return HttpResponseRedirect(url)
            return FileResponse(files.storage.open(trace.raw_file, "rb"), as_attachment=True, filename=filename)
        ready_trace(trace)
        if not writers.chrome_ready(trace):
            raise NotReady("the Chrome export is still being written; try again in a few seconds")
        filename = f"trace-{trace.pk}-chrome.json.gz"
        url = files.download_url(files.name(CHROME), settings.TRACE_S3_REDIRECT_MB << 20, filename)
        if url:  # a large export in an object store: the client fetches it from there
            return HttpResponseRedirect(url)
        return FileResponse(files.open(CHROME), as_attachment=True, filename=filename)


class CaptureView(APIView):
    """POST /api/devices/<id>/capture/: capture a trace of a device (operators)."""

    permission_classes = [CanCaptureTraces]

    @extend_schema(
        request=CaptureRequestSerializer,
        responses={202: CreatedSerializer, 400: OpenApiResponse(description="Bad duration or problems"),
                   409: OpenApiResponse(description="The device is already capturing")},
    )
    def post(self, request, pk: int):
        device = get_object_or_404(Device.objects.select_related("host"), pk=pk)
        raw = request.data.get("duration_s", writers.DEFAULT_CAPTURE_S) if hasattr(request.data, "get") else None
        problems = request.data.get("problems") if hasattr(request.data, "get") else None
        iterations = request.data.get("iterations") if hasattr(request.data, "get") else None
        if hasattr(request.data, "getlist") and not isinstance(problems, list):  # a form: problems=a&problems=b
            problems = request.data.getlist("problems") or None
        try:
            trace = process_requests.request_device_capture(device, request.user, raw, problems, iterations)
        except writers.TraceRefused as exc:
            raise Refused(exc) from None
        return Response({"id": trace.pk, "url": trace.get_absolute_url(), "status": trace.status},
                        status=status.HTTP_202_ACCEPTED)


class HostCaptureView(APIView):
    """POST /api/hosts/<id>/capture/: capture one PyTorch process of a host with an agent,
    named by its pid among the processes polling that agent (operators)."""

    permission_classes = [CanCaptureTraces]

    @extend_schema(
        request=HostCaptureRequestSerializer,
        responses={202: CreatedSerializer, 400: OpenApiResponse(description="Bad pid, duration or iterations"),
                   409: OpenApiResponse(description="The process is being captured, or the host cannot capture")},
    )
    def post(self, request, pk: int):
        host = get_object_or_404(Host, pk=pk)
        form = HostCaptureRequestSerializer(data=request.data)
        if not form.is_valid():
            raise ValidationError(form.errors)
        data = form.validated_data
        try:
            iterations = writers.validate_iterations(data["iterations"], host) if "iterations" in data else None
            duration = writers.validate_duration(writers.MAX_CAPTURE_S if iterations else data["duration_s"])
            trace = process_requests.request_process_capture(host, request.user, duration, iterations, pid=data["pid"])
        except writers.TraceRefused as exc:
            raise Refused(exc) from None
        return Response({"id": trace.pk, "url": trace.get_absolute_url(), "status": trace.status},
                        status=status.HTTP_202_ACCEPTED)
