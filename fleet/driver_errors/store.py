"""Storing drained error events: one row per device, fingerprint and time bucket, its count
and last time raised by every later drain that brings the same event (across polls, workers
and a flood). Keyed by serial and host, so a device's history follows it to another host.
Rows are kept DRIVER_ERROR_RETENTION_DAYS after they were first seen (`prune`, hourly).
"""

from __future__ import annotations

import hashlib
import logging
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F
from django.db.models.functions import Greatest

from fleet.asicmon.errors.events import ErrorEvent
from fleet.models import DriverError

log = logging.getLogger(__name__)

__all__ = ["prune", "record_events"]

PRUNE_BATCH = 5_000  # rows deleted per statement: a long backlog never holds one long lock
#: The kernel log and NVML report one Xid within this many seconds of each other: one fault.
SAME_FAULT_S = 30.0


def _when(epoch: float) -> datetime:
    return datetime.fromtimestamp(epoch, tz=UTC)


def record_events(host: str, events_by_serial: dict[str, list[ErrorEvent]], device_ids: dict[str, int]) -> list[DriverError]:
    """Stores the events of one host's poll; returns the rows that are new (not merged)."""
    bucket_s = settings.DRIVER_ERROR_BUCKET_S
    created: list[DriverError] = []
    for serial, events in events_by_serial.items():
        device_id = device_ids.get(serial)
        for event in events:
            row = _record(host, serial if device_id else "", device_id, event, bucket_s)
            if row is not None:
                created.append(row)
    return created


def _record(host: str, serial: str, device_id: int | None, event: ErrorEvent, bucket_s: float) -> DriverError | None:
    key = hashlib.sha1(event.key.encode()).hexdigest()  # noqa: S324 - an identity, not a secret
    bucket = int(event.first_seen // bucket_s)
    match = DriverError.objects.filter(host=host, serial=serial, fingerprint=key, bucket=bucket)
    if match.update(count=F("count") + event.count, last_seen=Greatest(F("last_seen"), _when(event.last_seen))):
        return None
    if serial and _seen_by_another_source(host, serial, event):
        return None
    try:
        with transaction.atomic():
            return DriverError.objects.create(
                device_id=device_id, serial=serial, host=host, vendor=event.vendor, code=event.code[:32],
                name=event.name[:128] or f"{event.vendor} {event.code}", meaning=event.meaning[:500],
                severity=event.severity or "warning", action=event.action or "ignore", cause=event.cause[:32],
                known=event.known, hardware=event.hardware, detail=event.detail[:500], raw=event.raw[:1000], source=event.source[:16],
                address=event.address[:32], count=event.count, first_seen=_when(event.first_seen),
                last_seen=_when(event.last_seen), bucket=bucket, fingerprint=key,
            )
    except IntegrityError:  # another worker stored the same event meanwhile: add to it
        match.update(count=F("count") + event.count, last_seen=Greatest(F("last_seen"), _when(event.last_seen)))
        return None


def _seen_by_another_source(host: str, serial: str, event: ErrorEvent) -> bool:
    """Whether the same fault is stored already as another source read it (an Xid from the
    kernel log and from NVML's events): that row says both sources, and no second row (nor a
    second trigger of the ladder) is made."""
    near = (_when(event.first_seen - SAME_FAULT_S), _when(event.first_seen + SAME_FAULT_S))
    other = (DriverError.objects.filter(host=host, serial=serial, vendor=event.vendor, code=event.code[:32],
                                        first_seen__range=near).exclude(source__contains=event.source)
             .order_by("first_seen").first())
    if other is None or not event.source:
        return False
    sources = "+".join(sorted({*other.source.split("+"), event.source}))[:16]
    DriverError.objects.filter(pk=other.pk).update(source=sources,
                                                   last_seen=Greatest(F("last_seen"), _when(event.last_seen)))
    return True


def prune(now: datetime | None = None) -> int:
    """Deletes the errors first seen more than DRIVER_ERROR_RETENTION_DAYS ago, a batch at a
    time (through the first_seen index); returns how many."""
    now = now or datetime.now(tz=UTC)
    cutoff = now - timedelta(days=settings.DRIVER_ERROR_RETENTION_DAYS)
    deleted = 0
    while True:
        ids = list(DriverError.objects.filter(first_seen__lt=cutoff).order_by("first_seen").values_list("id", flat=True)[:PRUNE_BATCH])
        if not ids:
            break
        deleted += DriverError.objects.filter(id__in=ids).delete()[0]
    if deleted:
        log.info("driver errors: %d older than %d days deleted", deleted, settings.DRIVER_ERROR_RETENTION_DAYS)
    return deleted
