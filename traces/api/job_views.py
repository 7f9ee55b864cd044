"""The jobs API: capture a distributed job, upload one, read its ranks and its results."""

from django.conf import settings
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import PermissionDenied, ValidationError
from rest_framework.parsers import JSONParser
from rest_framework.response import Response
from rest_framework.views import APIView

from fleet.api import params
from traces import writers
from traces.api.permissions import CanCaptureTraces, CanUploadTraces, CanViewTraces
from traces.api.serializers import (
    CreatedSerializer,
    JobCaptureRequestSerializer,
    JobRankUploadSerializer,
    JobSerializer,
    JobUploadSerializer,
)
from traces.api.upload_views import Refused, UploadCreate
from traces.api.views import NotReady
from traces.choices import JobStatus, RankStatus
from traces.jobs import arrivals as job_arrivals
from traces.jobs import capture as job_capture
from traces.jobs import results as job_results
from traces.jobs import uploads as job_uploads
from traces.models import Job
from traces.processes import jobs as process_jobs

MAX_TIMELINE_COLLECTIVES = 500


def _created(job: Job, **more) -> Response:
    return Response({"id": job.pk, "url": job.get_absolute_url(), "status": job.status, **more},
                    status=status.HTTP_202_ACCEPTED)


def ready_job(job: Job) -> Job:
    if job.status != JobStatus.READY:
        reason = f": {job.error}" if job.error else ""
        raise NotReady(f"job {job.pk} is {job.status}{reason}; its results are not ready")
    return job


class JobViewSet(UploadCreate, viewsets.ReadOnlyModelViewSet):
    """Distributed jobs: their ranks, status and cross-rank results."""

    serializer_class = JobSerializer
    upload_serializer, files_field, uploads_field = JobUploadSerializer, "files", "uploads"

    permission_classes = [CanViewTraces]  # the ranks/ route: its own (every method of it)

    def get_permissions(self):
        return [CanUploadTraces()] if self.action == "create" else super().get_permissions()

    def get_queryset(self):
        queryset = Job.objects.for_list().prefetch_related("ranks")
        if self.action == "list" and (state := params.parse_choice(self.request.query_params, "status", JobStatus.values)):
            queryset = queryset.filter(status=state)
        return queryset

    @extend_schema(
        request={"multipart/form-data": JobUploadSerializer, "application/json": JobUploadSerializer},
        responses={202: CreatedSerializer, 400: OpenApiResponse(description="A bad file: which, and the engine's message"),
                   413: OpenApiResponse(description="Too large"), 507: OpenApiResponse(description="Storage full")},
    )
    def create(self, request):
        """Upload a job: one trace file per rank (multipart ``files``, or finished resumable
        uploads as JSON ``{"uploads": [...]}``); checked, stored, analysed. Or open a job
        whose ranks are sent one at a time as they are ready (``{"world_size": N}``, then
        ``POST ranks/`` per rank): each is analysed when it arrives."""
        data, sources, uploads = self.upload_form(request)
        name = str(data.get("name", ""))[:200]
        if data.get("world_size") is not None:
            return self._open(request, data, sources, name)
        if data.get("wait_s") is not None:
            raise ValidationError({"wait_s": "wait_s goes with world_size (a job whose ranks are sent one at a time)."})
        if not sources:
            raise ValidationError({"files": "upload one trace file per rank (multipart field 'files', or 'uploads'), "
                                            "or open the job with world_size and send its ranks to ranks/."})
        job = self.made_from(uploads, lambda: job_uploads.accept_job_upload(sources, request.user, name=name))
        return _created(job)

    def _open(self, request, data: dict, sources: list, name: str) -> Response:
        if sources:
            raise ValidationError({"world_size": "send the whole job's files, or world_size and then each rank to "
                                                 "ranks/, not both."})
        if data["world_size"] > settings.JOB_MAX_RANKS:
            raise ValidationError({"world_size": f"a job has at most {settings.JOB_MAX_RANKS} ranks (JOB_MAX_RANKS)."})
        job = job_arrivals.open_job(request.user, data["world_size"], name=name, wait_s=data.get("wait_s"))
        return _created(job, ranks_url=f"/api/jobs/{job.pk}/ranks/", ranks_due_at=job.params["ranks_due_at"])

    @extend_schema(
        request={"multipart/form-data": JobRankUploadSerializer, "application/json": JobRankUploadSerializer},
        responses={202: OpenApiResponse(description="Stored; its analysis has started"),
                   400: OpenApiResponse(description="A bad file, or no rank known"),
                   403: OpenApiResponse(description="Not the job's opener"),
                   409: OpenApiResponse(description="The job takes no more ranks, or has this one"),
                   413: OpenApiResponse(description="Too large"), 507: OpenApiResponse(description="Storage full")},
    )
    @action(detail=True, methods=["post"], permission_classes=[CanUploadTraces])
    def ranks(self, request, pk=None):
        """Send one rank of a job opened with ``world_size`` (multipart ``file`` or a finished
        resumable ``upload``; ``rank`` if the trace does not say): checked, stored, and
        analysed at once; the cross-rank step follows the last rank."""
        job = self.get_object()
        if job.created_by_id != request.user.pk and not request.user.is_superuser:
            raise PermissionDenied("only the user who opened the job sends its ranks")
        data, sources, uploads = self.upload_form(request, (JobRankUploadSerializer, "file", "upload"))
        if not sources:
            raise ValidationError({"file": "send the rank's trace file (multipart field 'file', or 'upload')."})
        row = self.made_from(uploads, lambda: job_arrivals.accept_rank(job, sources[0], request.user,
                                                                        rank=data.get("rank")))
        arrived = job.ranks.exclude(status=RankStatus.FAILED).count()
        return Response({"job": job.pk, "rank": row.rank, "trace": row.trace_id, "status": row.status,
                         "ranks_in": arrived, "world_size": job.world_size}, status=status.HTTP_202_ACCEPTED)

    @extend_schema(responses={200: OpenApiResponse(description="The cross-rank report"),
                              409: OpenApiResponse(description="Not ready")})
    @action(detail=True, methods=["get"])
    def report(self, request, pk=None):
        """Ranks, collectives' arrival skew, stragglers, the cross-rank critical path, and the
        straggler's reasons from the fleet."""
        return Response(job_results.read_report(ready_job(self.get_object())))

    @extend_schema(
        parameters=[OpenApiParameter("first", int, description="First collective (default 0)"),
                    OpenApiParameter("limit", int, description=f"Collectives (default 60, at most {MAX_TIMELINE_COLLECTIVES})")],
        responses={200: OpenApiResponse(description="Arrivals and ends per rank, and the path"),
                   409: OpenApiResponse(description="Not ready")},
    )
    @action(detail=True, methods=["get"])
    def timeline(self, request, pk=None):
        """A window of collectives on every rank, with the critical path's segments in it."""
        job = ready_job(self.get_object())
        query = request.query_params
        first = query.get("first") or "0"
        if not first.isdigit():
            raise ValidationError({"first": f"'{first}' is not a non-negative integer."})
        count = params.parse_limit(query, default=job_results.TIMELINE_COLLECTIVES, maximum=MAX_TIMELINE_COLLECTIVES)
        return Response(job_results.timeline(job, int(first), count))


class JobCaptureView(APIView):
    """POST /api/jobs/capture/: capture a distributed job on devices (operators)."""

    permission_classes = [CanCaptureTraces]
    parser_classes = [JSONParser]

    @extend_schema(
        request=JobCaptureRequestSerializer,
        responses={202: CreatedSerializer, 400: OpenApiResponse(description="Bad devices or duration"),
                   409: OpenApiResponse(description="Every device is busy, or a host cannot capture")},
    )
    def post(self, request):
        form = JobCaptureRequestSerializer(data=request.data)
        if not form.is_valid():
            raise ValidationError(form.errors)
        data = form.validated_data
        if data.get("run_id") and (data.get("devices") or data.get("host") or data.get("type")):
            raise ValidationError({"run_id": ["a job is named by its run id or by its devices, not both"]})
        try:
            if data.get("run_id"):
                job = process_jobs.request_process_job(request.user, data["run_id"], data["duration_s"],
                                                       data.get("iterations"), name=data.get("name", ""))
                return _created(job)
            devices = job_capture.job_devices(device_ids=data.get("devices"), host=data.get("host", ""),
                                              device_type=data.get("type", ""))
            job = job_capture.request_job_capture(request.user, devices, data["duration_s"], name=data.get("name", ""),
                                                  parallelism=data["parallelism"])
        except writers.TraceRefused as exc:
            raise Refused(exc) from None
        return _created(job)
