"""The trace storage's budget and retention: what the stored traces and the uploads in
progress may take (TRACE_STORAGE_MAX_GB), and the traces past TRACE_RETENTION_DAYS that go
first when room is needed."""

from __future__ import annotations

import contextlib
from datetime import timedelta

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Sum
from django.utils import timezone

from traces.models import Trace, Upload
from traces.refusals import StorageFull

#: The advisory lock taken while the storage budget is checked and taken (budget_held).
BUDGET_LOCK = 0x617363_6D6F6E


def stored_bytes() -> int:
    return Trace.objects.aggregate(total=Sum("stored_bytes"))["total"] or 0


def budget_bytes() -> int:
    return int(settings.TRACE_STORAGE_MAX_GB * (1 << 30))


def retention_cutoff():
    return timezone.now() - timedelta(days=settings.TRACE_RETENTION_DAYS)


@contextlib.contextmanager
def budget_held(*, needed: bool = True):
    """A transaction in which one writer at a time checks the storage budget and takes its
    room (a PostgreSQL advisory lock; SQLite has one writer anyway), so that two uploads
    never both fit in the room left for one."""
    with transaction.atomic():
        if needed and connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_xact_lock(%s)", [BUDGET_LOCK])
        yield


def take_room(*sources) -> None:
    """Room for the files of an upload, in a budget_held transaction. A resumable upload
    took its room when it started: its row goes now (the trace row takes its place in the
    same transaction, so its bytes never count twice); a multipart file must fit."""
    fresh = sum(s.size for s in sources if not s.uploads)
    if fresh or not sources:
        make_room(fresh, uploads=[u for s in sources for u in s.uploads])
    Upload.objects.filter(pk__in=[u for s in sources for u in s.uploads]).delete()


def reserved_bytes(exclude=()) -> int:
    """Bytes the open resumable uploads (but those in ``exclude``) said they will bring."""
    return Upload.objects.exclude(pk__in=list(exclude)).aggregate(total=Sum("size"))["total"] or 0


def make_room(incoming: int, *, uploads=()) -> None:
    """Free space for ``incoming`` bytes beside the stored traces and the open uploads
    (those ``incoming`` comes from, ``uploads``, count once): traces past retention go
    first, oldest first; if that is not enough, refuse."""
    budget = budget_bytes()
    used = stored_bytes() + reserved_bytes(uploads)
    if used + incoming <= budget:
        return
    for trace in Trace.objects.filter(created_at__lt=retention_cutoff()).order_by("created_at"):
        used -= trace.stored_bytes
        delete_trace(trace)
        if used + incoming <= budget:
            return
    raise StorageFull(
        f"trace storage is full: {used / 1e9:.2f} GB of {budget / 1e9:.2f} GB "
        f"(TRACE_STORAGE_MAX_GB) used by traces within their {settings.TRACE_RETENTION_DAYS}-day "
        "retention and by uploads in progress; delete some traces or raise the budget"
    )


def delete_trace(trace: Trace) -> None:
    """Delete a trace's row; its files go when the deletion commits (traces/signals.py)."""
    trace.delete()


def prune_traces() -> int:
    """Delete traces past retention (and their files)."""
    pruned = 0
    for trace in Trace.objects.filter(created_at__lt=retention_cutoff()):
        delete_trace(trace)
        pruned += 1
    return pruned
