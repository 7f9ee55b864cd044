"""A span received from a service, kept for SPAN_RETENTION_HOURS unless a trace holds it."""

from django.db import models


class RequestSpanQuerySet(models.QuerySet):
    def overlapping(self, start_ns: int, end_ns: int):
        return self.filter(start_ns__lt=end_ns, end_ns__gt=start_ns)


class RequestSpan(models.Model):
    """One OpenTelemetry span, flattened: ids in hex, times in epoch nanoseconds.

    ``trace`` is the device trace it was uploaded beside, or the capture it was attached to
    (spans of a trace live and die with it; the others go after the retention window).
    """

    otel_trace_id = models.CharField(max_length=32)
    span_id = models.CharField(max_length=16)
    parent_span_id = models.CharField(max_length=16, blank=True)
    name = models.CharField(max_length=255)
    service = models.CharField(max_length=255, blank=True)
    request_id = models.CharField(max_length=255, blank=True)
    # The device the service ran on, where its resource says (asicmon.device.serial).
    device_serial = models.CharField(max_length=160, blank=True)
    start_ns = models.BigIntegerField()
    end_ns = models.BigIntegerField()
    kind = models.PositiveSmallIntegerField(default=0)
    status_code = models.PositiveSmallIntegerField(default=0)
    attributes = models.JSONField(default=dict, blank=True)
    resource = models.JSONField(default=dict, blank=True)
    # 0 for a span received over OTLP, else the id of the trace it was uploaded beside: the
    # same span sent twice is stored once per owner.
    owner = models.PositiveIntegerField(default=0)
    received_at = models.DateTimeField(auto_now_add=True, db_index=True)
    trace = models.ForeignKey(
        "traces.Trace", null=True, blank=True, on_delete=models.CASCADE, related_name="request_spans"
    )

    objects = RequestSpanQuerySet.as_manager()

    class Meta:
        app_label = "traces"
        ordering = ["start_ns", "id"]
        # Few indexes: the receiver writes thousands of rows a second. Lookups by OTel trace
        # use the unique constraint's index (its first column).
        indexes = [models.Index(fields=["start_ns"], name="request_span_start")]
        constraints = [
            models.UniqueConstraint(fields=["otel_trace_id", "span_id", "owner"], name="request_span_unique"),
        ]

    def __str__(self):
        return f"{self.name} {self.otel_trace_id}/{self.span_id}"
