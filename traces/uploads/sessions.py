"""Uploads, one service for traces and jobs: a file sent whole (a multipart POST) or in
chunks (a resumable upload), read back as a :class:`Source`.

A resumable upload is a row (:class:`traces.models.Upload`) and its parts in the traces
storage, ``uploads/<id>/<offset>.part``, one per chunk. A chunk must start where the bytes
stored so far end (``received``); one that starts elsewhere (a gap, or an overlap with what
is stored) is refused, so after a dropped connection the client asks for ``received`` and
sends from there. A part is counted only once it is stored whole: a chunk cut off midway is
not counted, and its retry replaces it. Finishing checks the size the client names against
the size it declared and the bytes stored. A trace or a job then reads the parts in order
as one stream (:class:`Parts`), copies it to its raw file, and the parts are deleted.
"""

from __future__ import annotations

import errno
import uuid
from datetime import timedelta
from pathlib import PurePath

from django.conf import settings
from django.core.files.storage import storages
from django.db import transaction
from django.utils import timezone

from traces import writers
from traces.models import Upload
from traces.uploads.handlers import INCOMING
from traces.uploads.sources import BigChunks, Parts, Source  # noqa: F401 (Source: what traces and jobs read)

FOLDER = "uploads"
COPY_BYTES = 1 << 20


class UploadRefused(writers.TraceRefused):
    status = 400


class UploadTooLarge(writers.TraceRefused):
    status = 413


class _Counted:
    """Reads at most ``limit`` bytes from ``stream`` and counts them."""

    closed = False  # asked by an object store's save, as of any file

    def __init__(self, stream, limit: int) -> None:
        self.stream, self.limit, self.count = stream, limit, 0

    def seekable(self) -> bool:
        return False

    def read(self, n: int = -1) -> bytes:
        want = self.limit + 1 - self.count if n < 0 else min(n, self.limit + 1 - self.count)
        data = self.stream.read(want) if want > 0 else b""
        self.count += len(data)
        return data


def storage():
    return storages["traces"]


def source_of(upload: Upload) -> Source:
    return Source(upload.filename, upload.size, lambda: Parts(storage(), part_names(upload), upload.filename),
                  uploads=(upload.pk,), parts=tuple(part_names(upload)))


def part_name(upload: Upload, offset: int) -> str:
    return f"{FOLDER}/{upload.pk}/{offset:016d}.part"


def part_names(upload: Upload) -> list[str]:
    return [part_name(upload, offset) for offset in upload.parts]


def start(user, filename: str, size) -> Upload:
    """A new resumable upload of ``size`` bytes; 413 past TRACE_UPLOAD_MAX_MB, 507 when the
    storage budget cannot take it beside the uploads already open."""
    name = PurePath(str(filename or "")).name[:200]
    if not name:
        raise UploadRefused("filename is required: the name of the file being uploaded")
    if not isinstance(size, int) or isinstance(size, bool) or size <= 0:
        raise UploadRefused(f"size must be the file's size in bytes (a positive integer), not {size!r}")
    if size > settings.TRACE_UPLOAD_MAX_MB << 20:
        raise UploadTooLarge(f"{name} is {size} bytes, larger than the {settings.TRACE_UPLOAD_MAX_MB} MB "
                             "that uploads may be (TRACE_UPLOAD_MAX_MB)")
    with writers.budget_held():
        writers.make_room(size)
        return Upload.objects.create(created_by=user, filename=name, size=size)


def parse_offset(raw) -> int:
    if raw is None or not str(raw).isdigit():
        raise UploadRefused(f"offset must be the chunk's first byte in the file (a non-negative integer), not {raw!r}")
    return int(raw)


def receive_chunk(upload_id: uuid.UUID, offset: int, body, length: int) -> Upload:
    """Store ``length`` bytes of ``body`` as the part at ``offset``; the upload as it is now."""
    with transaction.atomic():
        upload = Upload.objects.select_for_update().get(pk=upload_id)
        if upload.finished:
            raise UploadRefused(f"upload {upload.pk} is finished; it takes no more chunks")
        if offset != upload.received:
            how = "overlaps what is stored" if offset < upload.received else "leaves a gap after what is stored"
            raise UploadRefused(f"a chunk at offset {offset} {how}: the next chunk must start at "
                                f"offset {upload.received} (bytes stored so far)")
        if length <= 0:
            raise UploadRefused("a chunk must have at least one byte")
        if offset + length > upload.size:
            raise UploadRefused(f"a chunk of {length} bytes at offset {offset} ends past the declared size {upload.size}")
        counted = _Counted(body, length)
        name = part_name(upload, offset)
        _store(name, counted, length)
        if counted.count != length:
            storage().delete(name)
            raise UploadRefused(f"the chunk brought {counted.count} bytes, not the {length} its Content-Length said")
        upload.received += length
        upload.parts = [*upload.parts, offset]
        upload.save(update_fields=["received", "parts", "touched_at"])
    return upload


def _store(name: str, stream, length: int) -> None:
    store = storage()
    if hasattr(store, "writer"):  # an object store: sent in small parts as read (a part replaces itself)
        writer = store.writer(name, max_bytes=length)
        try:
            while data := stream.read(COPY_BYTES):
                writer.write(data)
        except BaseException:
            writer.abort()
            raise
        writer.close()
        return
    if store.exists(name):  # a part of an earlier try that was cut off
        store.delete(name)
    try:
        stored = store.save(name, BigChunks(stream, name=PurePath(name).name))
    except OSError as exc:
        if store.exists(name):
            store.delete(name)
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            raise writers.StorageFull(f"the trace storage's disk is full ({exc.strerror}); the chunk was not "
                                       "stored: free space and send it again") from None
        raise
    if stored != name:  # the storage picked another name: never keep two copies of a part
        store.delete(stored)
        raise UploadRefused(f"the part {name} could not be stored under its name")


def finish(upload_id: uuid.UUID, size) -> Upload:
    """Mark the upload complete once the size the client names is the one it declared and
    every byte is stored."""
    with transaction.atomic():
        upload = Upload.objects.select_for_update().get(pk=upload_id)
        if size != upload.size:
            raise UploadRefused(f"size {size!r} is not the {upload.size} bytes this upload declared")
        if upload.received != upload.size:
            raise UploadRefused(f"only {upload.received} of {upload.size} bytes are stored; send the rest "
                                f"from offset {upload.received} first")
        upload.finished = True
        upload.save(update_fields=["finished", "touched_at"])
    return upload


def finished_uploads(user, ids) -> list[Upload]:
    """The user's finished uploads of these ids, in the given order; 400 naming a bad one."""
    if not isinstance(ids, list) or not ids:
        raise UploadRefused("name the finished uploads to use: a list of upload ids")
    found = []
    for raw in ids:
        try:
            upload = Upload.objects.filter(pk=uuid.UUID(str(raw)), created_by=user).first()
        except ValueError:
            upload = None
        if upload is None:
            raise UploadRefused(f"no upload {raw} of yours")
        if not upload.finished:
            raise UploadRefused(f"upload {raw} ({upload.filename}) is not finished: {upload.received} of {upload.size} bytes")
        found.append(upload)
    return found


def discard(upload: Upload) -> None:
    """Delete an upload's parts and its row."""
    store = storage()
    for name in part_names(upload):
        if store.exists(name):
            store.delete(name)
    Upload.objects.filter(pk=upload.pk).delete()


def prune_idle(now=None) -> int:
    """Delete the uploads nobody touched for TRACE_UPLOAD_IDLE_HOURS."""
    cutoff = (now or timezone.now()) - timedelta(hours=settings.TRACE_UPLOAD_IDLE_HOURS)
    idle = list(Upload.objects.filter(touched_at__lt=cutoff))
    for upload in idle:
        discard(upload)
    return len(idle) + _prune_orphan_parts() + _prune_incoming(cutoff)


def _prune_orphan_parts() -> int:
    """Delete the parts of uploads whose row is gone (a process stopped between making a
    trace of them and deleting them)."""
    store = storage()
    try:
        folders, _files = store.listdir(FOLDER)
    except FileNotFoundError:
        return 0
    live = {str(pk) for pk in Upload.objects.values_list("pk", flat=True)}
    pruned = 0
    for folder in (f for f in folders if f not in live):
        names = store.listdir(f"{FOLDER}/{folder}")[1]
        for name in names:
            store.delete(f"{FOLDER}/{folder}/{name}")
        pruned += bool(names)
    return pruned


def _prune_incoming(cutoff) -> int:
    """Delete the files multipart POSTs left in an object store's ``incoming/`` (a web
    process stopped between storing one and the end of its request), once as old as an
    idle upload."""
    store = storage()
    try:
        folders, _files = store.listdir(INCOMING)
    except FileNotFoundError:
        return 0
    pruned = 0
    for folder in folders:
        for name in store.listdir(f"{INCOMING}/{folder}")[1]:
            path = f"{INCOMING}/{folder}/{name}"
            if store.get_modified_time(path) < cutoff:
                store.delete(path)
                pruned += 1
    return pruned
