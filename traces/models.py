"""A Trace row tracks one capture or upload through its states; its files live in storage.

The row holds what the catalogue filters and sorts on and what the header shows. The raw
trace and the analysis results are files in the ``traces`` storage (see traces/store/results.py),
under ``<id>/``; deleting the row deletes them (traces/signals.py).
"""

import uuid

from django.conf import settings
from django.db import models
from django.urls import reverse

from traces.choices import CAPTURE_BUSY_STATUSES, JobStatus, RankStatus, TraceSource, TraceStatus


class TraceQuerySet(models.QuerySet):
    def for_catalogue(self):
        """Everything a catalogue row shows, in one query."""
        return self.select_related("device__host", "created_by").order_by("-created_at", "-id")

    def busy_captures(self):
        return self.filter(source=TraceSource.CAPTURE, status__in=CAPTURE_BUSY_STATUSES)


class Lifecycle(models.Model):
    """What a trace and a job share as they go through their states: what it is, who asked,
    how far the current state is, and when each state began. Each keeps its own ``status``
    (its own states), ``error`` and ``attempts``; both end ready or failed."""

    name = models.CharField(max_length=200)
    source = models.CharField(max_length=16, choices=TraceSource.choices)
    progress = models.FloatField(default=0.0, help_text="0-1 within the current state")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    # Timings.
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    status_changed_at = models.DateTimeField(auto_now_add=True)
    capture_started_at = models.DateTimeField(null=True, blank=True)
    capture_ended_at = models.DateTimeField(null=True, blank=True)
    analysis_started_at = models.DateTimeField(null=True, blank=True)
    ready_at = models.DateTimeField(null=True, blank=True)

    #: The states it never leaves (the same values in TraceStatus and JobStatus).
    DONE_STATUSES = (TraceStatus.READY, TraceStatus.FAILED)

    class Meta:
        abstract = True
        ordering = ["-created_at", "-id"]

    def __str__(self):
        return f"{self.name} ({self.status})"

    @property
    def is_done(self) -> bool:
        return self.status in self.DONE_STATUSES


class Trace(Lifecycle):
    status = models.CharField(
        max_length=16, choices=TraceStatus.choices, default=TraceStatus.QUEUED, db_index=True
    )
    error = models.TextField(blank=True, help_text="Why the trace failed")
    attempts = models.PositiveSmallIntegerField(default=0, help_text="Analysis attempts so far")
    params = models.JSONField(default=dict, blank=True, help_text="What was asked (duration, ...)")

    # Where and what: copied onto the row so that the catalogue filters without joins and
    # keeps its facts when a device is removed.
    device = models.ForeignKey(
        "fleet.Device", null=True, blank=True, on_delete=models.SET_NULL, related_name="traces"
    )
    host_name = models.CharField(max_length=128, blank=True, db_index=True)
    device_type = models.CharField(max_length=32, blank=True, db_index=True)
    sw_version = models.CharField(max_length=32, blank=True, db_index=True)
    workload = models.CharField(max_length=64, blank=True)

    # Files and sizes.
    raw_file = models.CharField(max_length=255, blank=True, help_text="Storage name of the raw trace")
    raw_format = models.CharField(max_length=16, blank=True)
    raw_bytes = models.BigIntegerField(default=0)
    stored_bytes = models.BigIntegerField(default=0, help_text="All files of the trace")

    # What the analysis found.
    events = models.BigIntegerField(null=True, blank=True)
    span_us = models.FloatField(null=True, blank=True)
    started_at_us = models.FloatField(null=True, blank=True, help_text="First event, trace clock")
    iterations_kept = models.PositiveIntegerField(null=True, blank=True)
    iterations_run = models.PositiveIntegerField(null=True, blank=True)

    objects = TraceQuerySet.as_manager()

    class Meta(Lifecycle.Meta):
        permissions = [
            ("capture_trace", "Can capture a trace on a device"),
            ("upload_trace", "Can upload a trace"),
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["device"],
                condition=models.Q(source="capture", status__in=["queued", "capturing"]),
                name="trace_one_capture_per_device",
            ),
        ]

    def get_absolute_url(self):
        return reverse("traces:detail", args=[self.pk])

    @property
    def folder(self) -> str:
        return f"{self.pk}"


class JobQuerySet(models.QuerySet):
    def for_list(self):
        return self.select_related("created_by", "straggler_device").order_by("-created_at", "-id")


class Job(Lifecycle):
    """A distributed job captured on many devices at once, or uploaded as one file per rank:
    its ranks (JobRank, each with its Trace), their per-rank analyses and the cross-rank
    step. The cross-rank results are files in the traces storage (traces/store/files.py, JobFiles)."""

    status = models.CharField(max_length=16, choices=JobStatus.choices, default=JobStatus.QUEUED, db_index=True)
    error = models.TextField(blank=True, help_text="Why the job failed")
    attempts = models.PositiveSmallIntegerField(default=0, help_text="Cross-rank attempts so far")
    params = models.JSONField(default=dict, blank=True, help_text="What was asked (devices, duration, ...)")
    parallelism = models.CharField(max_length=16, blank=True)
    world_size = models.PositiveIntegerField(default=0)
    device_type = models.CharField(max_length=32, blank=True)
    workload = models.CharField(max_length=64, blank=True)

    # What the cross-rank step found.
    straggler_rank = models.IntegerField(null=True, blank=True)
    straggler_device = models.ForeignKey(
        "fleet.Device", null=True, blank=True, on_delete=models.SET_NULL, related_name="straggler_jobs"
    )
    summary = models.JSONField(default=dict, blank=True, help_text="Headline figures of the cross-rank step")

    objects = JobQuerySet.as_manager()

    def get_absolute_url(self):
        return reverse("traces:job", args=[self.pk])


class JobRank(models.Model):
    """One rank of a job: the device it ran on and the trace captured or uploaded for it."""

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="ranks")
    rank = models.PositiveIntegerField()
    status = models.CharField(max_length=16, choices=RankStatus.choices, default=RankStatus.QUEUED)
    error = models.TextField(blank=True)
    progress = models.FloatField(default=0.0)
    device = models.ForeignKey("fleet.Device", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    device_serial = models.CharField(max_length=160, blank=True)
    host_name = models.CharField(max_length=128, blank=True)
    trace = models.ForeignKey(Trace, null=True, blank=True, on_delete=models.SET_NULL, related_name="job_ranks")
    events = models.BigIntegerField(null=True, blank=True)
    digest_file = models.CharField(max_length=255, blank=True, help_text="Storage name of the rank's digest")
    health = models.JSONField(default=dict, blank=True, help_text="The device's health during the capture")

    class Meta:
        ordering = ["job", "rank"]
        constraints = [models.UniqueConstraint(fields=["job", "rank"], name="job_rank_unique")]

    def __str__(self):
        return f"job {self.job_id} rank {self.rank} ({self.status})"


class Upload(models.Model):
    """A resumable upload in progress (traces/uploads/sessions.py): its bytes are parts in
    the traces storage, ``uploads/<id>/<offset>.part``, until a trace or a job takes them."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    filename = models.CharField(max_length=200)
    size = models.BigIntegerField(help_text="Bytes the client said it will send")
    received = models.BigIntegerField(default=0, help_text="Bytes stored so far, from offset 0 without a gap")
    parts = models.JSONField(default=list, blank=True, help_text="Offsets of the stored parts, in order")
    finished = models.BooleanField(default=False, help_text="Every byte is in and the size was confirmed")
    created_at = models.DateTimeField(auto_now_add=True)
    touched_at = models.DateTimeField(auto_now=True, db_index=True)

    def __str__(self) -> str:
        return f"upload {self.pk} of {self.filename} ({self.received}/{self.size})"


from traces.requests.models import RequestSpan  # noqa: E402, F401  (request spans: traces/requests/)
