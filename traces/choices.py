"""Trace states and sources."""

from django.db import models


class TraceStatus(models.TextChoices):
    """queued → capturing (captures only) → analysing → ready, or failed with a reason."""

    QUEUED = "queued", "Queued"
    CAPTURING = "capturing", "Capturing"
    ANALYSING = "analysing", "Analysing"
    READY = "ready", "Ready"
    FAILED = "failed", "Failed"


class TraceSource(models.TextChoices):
    CAPTURE = "capture", "Capture"
    UPLOAD = "upload", "Upload"


#: States a trace can still leave by itself (each has a timeout).
ACTIVE_STATUSES = (TraceStatus.QUEUED, TraceStatus.CAPTURING, TraceStatus.ANALYSING)
#: States in which a capture holds its device.
CAPTURE_BUSY_STATUSES = (TraceStatus.QUEUED, TraceStatus.CAPTURING)


class JobStatus(models.TextChoices):
    """queued → capturing (captures only) → analysing (each rank on its own) → combining (the
    cross-rank step) → ready, or failed with a reason. Each active state has a timeout."""

    QUEUED = "queued", "Queued"
    CAPTURING = "capturing", "Capturing"
    ANALYSING = "analysing", "Analysing ranks"
    COMBINING = "combining", "Combining ranks"
    READY = "ready", "Ready"
    FAILED = "failed", "Failed"


class RankStatus(models.TextChoices):
    """One rank of a job: queued → capturing → analysing → ready; busy (its device was
    capturing something else: not traced) or failed with a reason."""

    QUEUED = "queued", "Queued"
    CAPTURING = "capturing", "Capturing"
    ANALYSING = "analysing", "Analysing"
    READY = "ready", "Ready"
    BUSY = "busy", "Device busy"
    FAILED = "failed", "Failed"


#: Job states a job can still leave by itself (each has a timeout).
JOB_ACTIVE_STATUSES = (JobStatus.QUEUED, JobStatus.CAPTURING, JobStatus.ANALYSING, JobStatus.COMBINING)
#: Rank states that keep the cross-rank step waiting.
RANK_PENDING_STATUSES = (RankStatus.QUEUED, RankStatus.CAPTURING, RankStatus.ANALYSING)
