"""Uploads in the API, one way for traces and jobs.

A trace (``POST /api/traces/``) or a job (``POST /api/jobs/``) is made from multipart files
(small files, scripts), or from finished resumable uploads named by id (JSON), which is how
the pages send files of any size: ``POST /api/uploads/`` starts one, ``PUT
/api/uploads/<id>/?offset=N`` stores a chunk, ``GET`` says how many bytes are stored (where
to resume), ``POST .../finish/`` confirms the size, ``DELETE`` drops it. The gate in front of
Django (dashboard/gate/upload_gate.py) has already refused what may not be sent.
"""

from __future__ import annotations

from django.conf import settings
from django.http import UnreadablePostError
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import APIException, ValidationError
from rest_framework.parsers import JSONParser, MultiPartParser
from rest_framework.response import Response

from traces import writers
from traces.api.permissions import CanUploadTraces
from traces.api.serializers import (
    UploadFinishSerializer,
    UploadStartSerializer,
    UploadStateSerializer,
)
from traces.models import Upload
from traces.uploads import sessions as upload_sessions
from traces.uploads.handlers import refusal, use_limited_handlers
from traces.uploads.sources import Source


class Refused(APIException):
    def __init__(self, exc: writers.TraceRefused):
        self.status_code = exc.status
        super().__init__(detail=str(exc))


class TooLarge(APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE


class UploadCreate:
    """The create of a viewset whose rows are made from uploads (traces, jobs): the form is
    read with the size-limited handlers, and its files (multipart) or its finished uploads
    (JSON) become :class:`~traces.uploads.sources.Source` objects."""

    parser_classes = [MultiPartParser, JSONParser]
    upload_serializer = None
    files_field = uploads_field = ""

    def initialize_request(self, request, *args, **kwargs):
        use_limited_handlers(request)  # before anything (the CSRF check) reads the body
        return super().initialize_request(request, *args, **kwargs)

    def upload_form(self, request, shape=None) -> tuple[dict, list[Source], list[Upload]]:
        """The form's fields, its sources, and the resumable uploads they came from.
        ``shape``: (serializer, files field, uploads field), else the class's."""
        serializer, files_field, uploads_field = shape or (self.upload_serializer, self.files_field, self.uploads_field)
        try:
            form = serializer(data=request.data)
            valid = form.is_valid()
        except UnreadablePostError:
            form, valid = None, False
        if reason := refusal(request._request):
            raise TooLarge(reason)
        if not valid:
            raise ValidationError(form.errors if form is not None else {"detail": "the request's body could not be read"})
        data = form.validated_data
        ids = data.get(uploads_field)
        if ids and data.get(files_field):
            raise ValidationError({uploads_field: f"send {files_field} or {uploads_field}, not both."})
        if not ids:
            files = data.get(files_field)
            files = files if isinstance(files, list) else [files] if files else []
            return data, [Source.of_file(f) for f in files], []
        try:
            uploads = upload_sessions.finished_uploads(request.user, ids if isinstance(ids, list) else [ids])
        except writers.TraceRefused as exc:
            raise Refused(exc) from None
        return data, [upload_sessions.source_of(u) for u in uploads], uploads

    @staticmethod
    def made_from(uploads: list[Upload], make):
        """``make()``, turning a refusal into its answer; the uploads it used are dropped
        once it succeeds (their bytes are in the trace's files)."""
        try:
            made = make()
        except writers.TraceRefused as exc:
            raise Refused(exc) from None
        for upload in uploads:
            upload_sessions.discard(upload)
        return made


def _state(upload: Upload) -> dict:
    return {"id": str(upload.pk), "url": f"/api/uploads/{upload.pk}/", "filename": upload.filename,
            "size": upload.size, "received": upload.received, "finished": upload.finished,
            "chunk_max_bytes": settings.TRACE_UPLOAD_CHUNK_MB << 20}


class UploadViewSet(mixins.RetrieveModelMixin, mixins.DestroyModelMixin, viewsets.GenericViewSet):
    """Resumable uploads of large traces: start, send chunks, finish; then name it in
    ``POST /api/traces/`` (``{"upload": id}``) or ``POST /api/jobs/`` (``{"uploads": [...]}``)."""

    permission_classes = [CanUploadTraces]
    serializer_class = UploadStateSerializer
    parser_classes = [JSONParser]
    queryset = Upload.objects.none()  # the model, for the schema (its id is a UUID): get_queryset picks the rows

    def get_queryset(self):
        """The user's own uploads; an administrator may see and cancel anyone's."""
        if self.request.user.is_superuser:
            return Upload.objects.all()
        return Upload.objects.filter(created_by=self.request.user)

    def retrieve(self, request, pk=None):
        """How many bytes are stored: the offset the next chunk starts at."""
        return Response(_state(self.get_object()))

    @extend_schema(request=UploadStartSerializer, responses={201: UploadStateSerializer,
                   413: OpenApiResponse(description="Too large"), 507: OpenApiResponse(description="Storage full")})
    def create(self, request):
        """Start an upload of ``size`` bytes."""
        form = UploadStartSerializer(data=request.data)
        if not form.is_valid():
            raise ValidationError(form.errors)
        try:
            upload = upload_sessions.start(request.user, form.validated_data["filename"], form.validated_data["size"])
        except writers.TraceRefused as exc:
            raise Refused(exc) from None
        return Response(_state(upload), status=status.HTTP_201_CREATED)

    @extend_schema(
        parameters=[OpenApiParameter("offset", int, required=True, description="The chunk's first byte in the file")],
        request={"application/octet-stream": OpenApiTypes.BINARY},
        responses={200: UploadStateSerializer, 400: OpenApiResponse(description="A gap, an overlap, past the size"),
                   507: OpenApiResponse(description="Disk full")},
    )
    def update(self, request, pk=None):
        """Store a chunk (the raw body) at ``offset``, which must be the bytes stored so far."""
        upload = self.get_object()
        django_request = request._request
        try:
            offset = upload_sessions.parse_offset(request.query_params.get("offset"))
            length = int(django_request.META.get("CONTENT_LENGTH") or 0)
            upload = upload_sessions.receive_chunk(upload.pk, offset, django_request, length)
        except writers.TraceRefused as exc:
            raise Refused(exc) from None
        return Response(_state(upload))

    @extend_schema(request=UploadFinishSerializer, responses={200: UploadStateSerializer,
                   400: OpenApiResponse(description="Wrong size, or bytes missing")})
    @action(detail=True, methods=["post"])
    def finish(self, request, pk=None):
        """Confirm the file's size: every byte must be stored."""
        upload = self.get_object()
        form = UploadFinishSerializer(data=request.data)
        if not form.is_valid():
            raise ValidationError(form.errors)
        try:
            upload = upload_sessions.finish(upload.pk, form.validated_data["size"])
        except writers.TraceRefused as exc:
            raise Refused(exc) from None
        return Response(_state(upload))

    def perform_destroy(self, instance):
        upload_sessions.discard(instance)
