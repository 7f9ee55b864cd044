"""The API of request spans: an OTLP JSON file uploaded beside a trace, and the requests of a
trace joined to its engine steps (traces/requests/service.py does the work)."""

from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.exceptions import ValidationError
from rest_framework.parsers import MultiPartParser
from rest_framework.response import Response
from rest_framework.views import APIView

from traces.api.permissions import CanUploadTraces
from traces.atrace.io.otlp import OtlpError
from traces.models import Trace
from traces.requests import service


class SpanFileSerializer(serializers.Serializer):
    file = serializers.FileField(help_text="OTLP JSON: the Collector's file exporter format, one request a line")


class SpanUploadView(APIView):
    permission_classes = [CanUploadTraces]
    parser_classes = [MultiPartParser]

    @extend_schema(
        summary="Upload request spans beside a trace",
        request={"multipart/form-data": SpanFileSerializer},
        responses={201: OpenApiTypes.OBJECT, 400: OpenApiResponse(description="Not OTLP JSON: the reason"),
                   413: OpenApiResponse(description="Too large")},
    )
    def post(self, request, pk: int):
        trace = get_object_or_404(Trace, pk=pk)
        upload = request.FILES.get("file")
        if upload is None:
            raise ValidationError({"file": "Send the spans file as the multipart field 'file'."})
        try:
            kept = service.upload_spans(trace, upload)
        except service.TooLarge as exc:
            return Response({"detail": str(exc)}, status=413)
        except OtlpError as exc:
            raise ValidationError({"file": f"Not an OTLP JSON spans file: {exc}"}) from None
        return Response({"trace": trace.pk, "spans": kept}, status=201)
