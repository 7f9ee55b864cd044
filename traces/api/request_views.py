"""The API of request spans: an OTLP JSON file uploaded beside a trace, the requests of a
trace joined to its engine steps, and one request with its spans and the trace under it.
Thin: traces/requests/service.py and views.py do the work."""

from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.exceptions import ValidationError
from rest_framework.parsers import MultiPartParser
from rest_framework.response import Response
from rest_framework.views import APIView

from traces.api.permissions import CanUploadTraces, CanViewTraces
from traces.atrace.io.otlp import OtlpError
from traces.models import Job, Trace
from traces.requests import reading, service
from traces.store import page_data

JOINING = OpenApiResponse(description="The join is being computed: ask again in a few seconds")
NOT_JOINED = OpenApiResponse(description="Nothing to join (no spans, or spans and trace that do not meet): why")
REJOINING = OpenApiResponse(description="The stored join could not be read; it is being made again (Retry-After)")


class SpanFileSerializer(serializers.Serializer):
    file = serializers.FileField(help_text="OTLP JSON: the Collector's file exporter format, one request a line")


SPAN_UPLOAD_ANSWERS = {201: OpenApiTypes.OBJECT, 400: OpenApiResponse(description="Not OTLP JSON: the reason"),
                       413: OpenApiResponse(description="Too large")}


class _SpanUpload(APIView):
    """A spans file (multipart field ``file``) stored beside what ``pk`` names."""

    permission_classes = [CanUploadTraces]
    parser_classes = [MultiPartParser]
    model = None

    def store(self, target, upload) -> dict:
        raise NotImplementedError

    def post(self, request, pk: int):
        target = get_object_or_404(self.model, pk=pk)
        upload = request.FILES.get("file")
        if upload is None:
            raise ValidationError({"file": "Send the spans file as the multipart field 'file'."})
        try:
            answer = self.store(target, upload)
        except service.TooLarge as exc:
            return Response({"detail": str(exc)}, status=413)
        except OtlpError as exc:
            raise ValidationError({"file": f"Not an OTLP JSON spans file: {exc}"}) from None
        return Response(answer, status=201)


class SpanUploadView(_SpanUpload):
    model = Trace

    def store(self, trace, upload) -> dict:
        return {"trace": trace.pk, "spans": service.upload_spans(trace, upload)}

    @extend_schema(summary="Upload request spans beside a trace", operation_id="traces_spans_create",
                   request={"multipart/form-data": SpanFileSerializer}, responses=SPAN_UPLOAD_ANSWERS)
    def post(self, request, pk: int):
        return super().post(request, pk)


class JobSpanUploadView(_SpanUpload):
    model = Job

    def store(self, job, upload) -> dict:
        spans, ranks = service.upload_job_spans(job, upload)
        return {"job": job.pk, "ranks": ranks, "spans": spans}

    @extend_schema(summary="Upload request spans beside every rank of a job", operation_id="jobs_spans_create",
                   request={"multipart/form-data": SpanFileSerializer}, responses=SPAN_UPLOAD_ANSWERS)
    def post(self, request, pk: int):
        return super().post(request, pk)


def _answer(fn, *args) -> Response:
    try:
        return Response(fn(*args))
    except service.Unreadable as exc:
        return Response({"status": "joining", "detail": str(exc)}, status=503,
                        headers={"Retry-After": str(service.RETRY_AFTER_S)})
    except service.Pending as exc:
        return Response({"status": "joining", "detail": str(exc)}, status=202)
    except reading.NotJoined as exc:
        return Response({"detail": str(exc)}, status=409)
    except reading.UnknownRequest as exc:
        return Response({"detail": str(exc)}, status=404)
    except page_data.BadRequest as exc:
        raise ValidationError({"detail": str(exc)}) from None


class RequestsView(APIView):
    permission_classes = [CanViewTraces]

    @extend_schema(
        summary="The requests of a trace: percentiles, the slowest with their reasons",
        operation_id="traces_requests_list",
        description="Request spans joined to the trace's engine steps: the join's mode (ids or time) "
        "and confidence, latency p50/p90/p99, the worst ten with their time split, apportioned work, "
        "dominant kernels, device health and reason in words, and the slowest rows.",
        parameters=[OpenApiParameter("limit", int, description="Rows of the request table, slowest first (default 100)")],
        responses={200: OpenApiTypes.OBJECT, 202: JOINING, 409: NOT_JOINED, 503: REJOINING},
    )
    def get(self, request, pk: int):
        return _answer(reading.summary, get_object_or_404(Trace, pk=pk), request.query_params)


class RequestDetailView(APIView):
    permission_classes = [CanViewTraces]

    @extend_schema(
        summary="One request: its spans, its reason, and the trace's steps and kernels under it",
        operation_id="traces_request_retrieve",
        parameters=[OpenApiParameter("width_px", int, description="Width of the timeline under the spans")],
        responses={200: OpenApiTypes.OBJECT, 202: JOINING, 404: OpenApiResponse(description="No such request"),
                   409: NOT_JOINED, 503: REJOINING},
    )
    def get(self, request, pk: int, request_id: str):
        return _answer(reading.detail, get_object_or_404(Trace, pk=pk), request_id, request.query_params)
