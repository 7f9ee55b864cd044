"""A multipart upload's file goes, chunk by chunk, to a temporary file on disk, or straight
to the object store when traces are kept in one (its parts sent while the body is read: no
local copy, a few parts in memory); either stops at TRACE_UPLOAD_MAX_MB."""

import io
import uuid
from pathlib import PurePath

from django.conf import settings
from django.core.files.storage import storages
from django.core.files.uploadedfile import UploadedFile
from django.core.files.uploadhandler import FileUploadHandler, TemporaryFileUploadHandler
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


class StoredUpload(UploadedFile):
    """A multipart upload's file already in the object store as ``staging``: a Source
    copies it inside the store (traces/upload_sources.py); closing it, as Django closes a
    request's files when the request ends, deletes it."""

    def __init__(self, store, staging: str, name: str, size: int, content_type, charset) -> None:
        super().__init__(io.BytesIO(), name, content_type, size, charset)
        self.store, self.staging = store, staging

    def close(self) -> None:
        staging, self.staging = self.staging, None
        if staging:
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
        self.staging = f"{INCOMING}/{uuid.uuid4().hex}/{PurePath(file_name).name[-100:] or 'upload'}"
        self.file = _Sending(self.store.writer(self.staging))

    def receive_data_chunk(self, raw_data, start):
        if start + len(raw_data) > limit_bytes():
            self.file.close()
            self._refuse()
        self.file.writer.write(raw_data)

    def file_complete(self, file_size):
        self.file.done = True
        self.file.writer.close()
        return StoredUpload(self.store, self.staging, self.file_name, file_size, self.content_type, self.charset)

    def upload_interrupted(self):
        if isinstance(getattr(self, "file", None), _Sending):
            self.file.close()


def use_limited_handlers(request) -> None:
    """Call before the body is read (before CSRF checks read POST)."""
    to_store = hasattr(storages["traces"], "writer")
    request.upload_handlers = [(StoreUploadHandler if to_store else LimitedTemporaryFileUploadHandler)(request)]
