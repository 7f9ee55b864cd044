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
