"""A multipart upload's file goes, chunk by chunk, to a temporary file on disk, or straight
to the object store when traces are kept in one (its parts sent while the body is read: no
local copy, a few parts in memory); either stops at TRACE_UPLOAD_MAX_MB.

In the object store the file is stored where its trace will keep it: the handler reserves
the trace's id from the database's sequence and writes ``<id>/raw.<suffix>``, so that the
trace takes the object as it is (an object store has no rename, and a copy inside moto or
S3 takes seconds a gigabyte). Where no id can be reserved (SQLite), or when the file
becomes a job's rank (a trace of its own id), it waits in ``incoming/`` and is copied.
"""

import io
import uuid
from pathlib import PurePath

from django.conf import settings
from django.core.files.storage import storages
from django.core.files.uploadedfile import UploadedFile
from django.core.files.uploadhandler import FileUploadHandler, TemporaryFileUploadHandler
from django.db import connection
from django.http import UnreadablePostError

REFUSAL_ATTRIBUTE = "trace_upload_refused"


class UploadTooLarge(UnreadablePostError):
    """An UnreadablePostError, so that the CSRF check, which may read the body first, lets
    it through; the reason stays on the request (see :func:`refusal`)."""

    def __init__(self, limit_mb: int):
        super().__init__(
            f"the file is larger than the {limit_mb} MB that uploads may be (TRACE_UPLOAD_MAX_MB)"
        )


def refusal(request) -> str | None:
    """Why the upload handler stopped reading this request's body, if it did."""
    return getattr(request, REFUSAL_ATTRIBUTE, None)


def limit_bytes() -> int:
    return settings.TRACE_UPLOAD_MAX_MB * (1 << 20)


class LimitedTemporaryFileUploadHandler(TemporaryFileUploadHandler):
    """Never holds an upload in memory, and refuses one past the size limit."""

    chunk_size = 1 << 20  # (Django's 64 kB: 16 times the reads, writes and lock hand-overs)

    def _refuse(self):
        error = UploadTooLarge(settings.TRACE_UPLOAD_MAX_MB)
        setattr(self.request, REFUSAL_ATTRIBUTE, str(error))
        raise error

    def handle_raw_input(self, input_data, META, content_length, boundary, encoding=None):
        if content_length and content_length > limit_bytes() + (1 << 20):
            self._refuse()

    def receive_data_chunk(self, raw_data, start):
        if start + len(raw_data) > limit_bytes():
            self.file.close()
            self._refuse()
        return super().receive_data_chunk(raw_data, start)


#: Where a multipart upload's file waits in the object store until its trace or job copies it.
INCOMING = "incoming"


def reserve_trace_id() -> int | None:
    """An id of the traces' sequence that no other trace will get (PostgreSQL); None elsewhere."""
    from traces.models import Trace

    if connection.vendor != "postgresql":
        return None
    with connection.cursor() as cursor:
        cursor.execute("SELECT nextval(pg_get_serial_sequence(%s, 'id'))", [Trace._meta.db_table])
        return cursor.fetchone()[0]


class StoredUpload(UploadedFile):
    """A multipart upload's file already in the object store as ``staging``, under the
    reserved ``trace_id`` or in ``incoming/`` (see the module). Closing it, as Django closes
    a request's files when the request ends, deletes it unless that trace took it."""

    def __init__(self, store, staging: str, trace_id: int | None, head: bytes, name: str, size: int,
                 content_type, charset) -> None:
        super().__init__(io.BytesIO(), name, content_type, size, charset)
        self.store, self.staging, self.trace_id = store, staging, trace_id
        self.head = head  # its first chunk, as received: a look at its head needs no GET

    def close(self) -> None:
        from traces.models import Trace

        staging, self.staging = self.staging, None
        if staging and not Trace.objects.filter(pk=self.trace_id, raw_file=staging).exists():
            self.store.delete(staging)
        super().close()


class _Sending:
    """The handler's ``file`` while a file is sent: Django's parser closes it when it stops
    midway, which drops what was sent."""

    def __init__(self, writer) -> None:
        self.writer, self.done = writer, False

    def close(self) -> None:
        if not self.done:
            self.done = True
            self.writer.abort()


class StoreUploadHandler(LimitedTemporaryFileUploadHandler):
    """The limited handler for an object store (a storage with ``writer``): the file's
    bytes go to ``incoming/<random>/<name>`` in the store as they are read."""

    def new_file(self, field_name, file_name, *args, **kwargs):
        FileUploadHandler.new_file(self, field_name, file_name, *args, **kwargs)  # no temporary file
        self.store = storages["traces"]
        self.__dict__.pop("file", None)  # Django's parser closes a handler's ``file`` if it has one
        self.trace_id = reserve_trace_id()

    def _start(self, head: bytes) -> None:
        """The object's name, known from the file's name and its first bytes (gzip or not)."""
        from traces.store.files import TraceFiles

        if self.trace_id is None:
            self.staging = f"{INCOMING}/{uuid.uuid4().hex}/{PurePath(self.file_name).name[-100:] or 'upload'}"
        else:
            self.staging = TraceFiles(self.trace_id).raw_name(self.file_name, head)
        self.file = _Sending(self.store.writer(self.staging))

    def receive_data_chunk(self, raw_data, start):
        if start + len(raw_data) > limit_bytes():
            if hasattr(self, "file"):
                self.file.close()
            self._refuse()
        if not hasattr(self, "file"):
            self._start(raw_data[:2])
            self.head = bytes(raw_data)
        self.file.writer.write(raw_data)

    def file_complete(self, file_size):
        if not hasattr(self, "file"):
            self._start(b"")
            self.head = b""
        self.file.done = True
        self.file.writer.close()
        return StoredUpload(self.store, self.staging, self.trace_id, self.head, self.file_name, file_size,
                            self.content_type, self.charset)

    def upload_interrupted(self):
        if isinstance(getattr(self, "file", None), _Sending):
            self.file.close()


def use_limited_handlers(request) -> None:
    """Call before the body is read (before CSRF checks read POST)."""
    to_store = hasattr(storages["traces"], "writer")
    request.upload_handlers = [(StoreUploadHandler if to_store else LimitedTemporaryFileUploadHandler)(request)]
