"""The traces app's receivers: deleting a trace (or a job) deletes its files once the
deletion has committed; the fleet's ``capture_wanted`` (a health rule asking for a trace) starts a capture."""

import logging

from django.db import transaction
from django.db.models.signals import post_delete
from django.dispatch import receiver

from fleet.signals import capture_wanted
from traces.models import Job, Trace
from traces.store.files import JobFiles, TraceFiles

log = logging.getLogger(__name__)


@receiver(post_delete, sender=Trace)
def delete_trace_files(sender, instance: Trace, **kwargs):
    files = TraceFiles(instance.pk)
    transaction.on_commit(files.delete_all)


@receiver(post_delete, sender=Job)
def delete_job_files(sender, instance: Job, **kwargs):
    files = JobFiles(instance.pk)
    transaction.on_commit(files.delete_all)


@receiver(capture_wanted)
def capture_for_fleet(sender, device, duration_s: float, reason: str, **kwargs) -> int | None:
    """A capture of the device by nobody in particular; None when the service refuses it."""
    from traces.processes.requests import request_device_capture
    from traces.writers import TraceRefused

    try:
        trace = request_device_capture(device, None, duration_s)
    except TraceRefused as exc:
        log.info("no automatic capture of %s (%s): %s", device.serial, reason, exc)
        return None
    return trace.pk
