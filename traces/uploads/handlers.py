"""Uploads go to a temporary file on disk, chunk by chunk, and stop at TRACE_UPLOAD_MAX_MB."""

from django.conf import settings
from django.core.files.uploadhandler import TemporaryFileUploadHandler
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


def use_limited_handlers(request) -> None:
    """Call before the body is read (before CSRF checks read POST)."""
    request.upload_handlers = [LimitedTemporaryFileUploadHandler(request)]
