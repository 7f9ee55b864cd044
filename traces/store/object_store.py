"""The traces storage in an S3-compatible object store (AWS S3, Ceph RGW, MinIO, R2, GCS's
S3 API), through django-storages' S3Storage with two changes for large traces:

- Writes go up in parts of ``TRACE_S3_PART_MB`` (a multipart upload past one part), at
  most ``TRACE_S3_PARTS_IN_FLIGHT`` parts in memory at once: a 1 GB upload holds a few
  parts, never the file. The object appears only when its upload completes, so a writer
  killed midway leaves no object (its parts wait for the bucket's lifecycle rule that
  aborts incomplete multipart uploads; docs/deploy.md). :meth:`TraceObjectStorage.writer`
  is the same for bytes that arrive in pieces (a request body): each part is sent as soon
  as it is full, while the next one fills.
- Reads stream: ``open(name, "rb")`` is a buffered reader over one GET from the position
  read on (another after a seek), read one block ahead by a thread of the reader (so the
  network and the parse overlap), instead of S3Storage's copy of the whole object into a
  temporary file. A worker parses a trace as it arrives; a page's ranged read (a slice of
  the instance file) reads little more than that slice.
- Saves go through :class:`PartWriter` too: one PUT for a file under a part.
- One S3 connection (boto3 resource and its client) per storage, shared by every thread.
  S3Storage makes one per thread, and Django runs each request's view in a new thread: a
  web process built a session and a resource (~12 MB and ~60 ms) for every request,
  each chunk of a resumable upload included. Botocore's clients are thread-safe; each use
  here takes a fresh ``Bucket``/``Object`` of the resource, so no state is shared but them.
- A request body (:meth:`TraceObjectStorage.writer`, a resumable upload's chunk) goes up in
  parts of S3's 5 MB floor (UPLOAD_PART) rather than TRACE_S3_PART_MB: the web process
  holds at most ``in_flight + 1`` of them per upload.

Which storage is used is settings' ``STORAGES["traces"]`` (``TRACE_STORAGE=s3://…``).
"""

from __future__ import annotations

import io
import itertools
import math
import queue
import threading
from concurrent.futures import ThreadPoolExecutor

from botocore.config import Config
from botocore.exceptions import ClientError
from django.conf import settings
from django.core.files import File
from storages.backends.s3 import S3Storage
from storages.utils import ReadBytesWrapper, clean_name, is_seekable

READ_BUFFER = 1 << 20
MIN_PART = 5 << 20  # S3's smallest part but the last
READ_BLOCKS = (1 << 20, 4 << 20, 16 << 20)  # the GETs' sizes as a sequential read goes on (then the last)
SAVE_READ = 1 << 20  # what a save reads of its file at a time
COPY_PART = 256 << 20  # a part copied inside the store at most (S3's limit: 5 GB)
UPLOAD_PART = MIN_PART  # a request body's parts (the web process's memory: module docstring)
MAX_PARTS = 10_000  # S3's most parts of one object


class ReadAhead:
    """One GET of an object from ``start`` to its end, read by a thread one block ahead of
    the reader: the next block comes in while the reader reads the one it took. The blocks
    grow (READ_BLOCKS), so a short read (a file's head, a page's slice) reads little of the
    stream before it is closed. (One GET, not a ranged GET a block: some stores, moto's
    among them, read the whole object for each range.)"""

    def __init__(self, obj, start: int) -> None:
        self._blocks: queue.SimpleQueue = queue.SimpleQueue()
        self._wanted = threading.Semaphore(1)  # blocks the reader may have waiting for it
        self._stop = threading.Event()
        self._current, self._offset = b"", 0
        self._thread = threading.Thread(target=self._fetch, args=(obj, start), daemon=True)
        self._thread.start()

    def _fetch(self, obj, start: int) -> None:
        body = None
        try:
            body = obj.get(Range=f"bytes={start}-")["Body"]
            for step in itertools.count():
                while not self._wanted.acquire(timeout=0.5):
                    if self._stop.is_set():
                        return
                if self._stop.is_set():
                    return
                data = body.read(READ_BLOCKS[min(step, len(READ_BLOCKS) - 1)])
                self._blocks.put(data)
                if not data:
                    return  # the end of the object (or it ended early: it was replaced)
        except BaseException as exc:  # noqa: BLE001 - handed to the reader, which raises it
            self._blocks.put(exc)
        finally:
            if body is not None:
                body.close()

    def read(self, n: int) -> bytes:
        """Up to ``n`` bytes; b"" at the end of the object."""
        if self._offset >= len(self._current):
            item = self._blocks.get()
            self._wanted.release()  # fetch the next while this one is read
            if isinstance(item, BaseException):
                raise item
            self._current, self._offset = item, 0
            if not item:
                return b""
        data = self._current[self._offset:self._offset + n]
        self._offset += len(data)
        return data

    def close(self) -> None:
        self._stop.set()


class ObjectReader(io.RawIOBase):
    """A read-only, seekable file over one object: each run of sequential reads is a
    :class:`ReadAhead` from where it starts."""

    def __init__(self, obj, size: int) -> None:
        self._obj, self._size = obj, size
        self._pos, self._ahead = 0, None

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self._size}[whence]
        pos = max(0, base + offset)
        if pos != self._pos:
            self._drop_ahead()
            self._pos = pos
        return self._pos

    def readinto(self, buffer) -> int:
        if self._pos >= self._size:
            return 0
        if self._ahead is None:
            self._ahead = ReadAhead(self._obj, self._pos)
        data = self._ahead.read(len(buffer))
        n = len(data)
        buffer[:n] = data
        self._pos += n
        if n == 0:  # the object ended early (it was replaced): stop here
            self._size = self._pos
        return n

    def _drop_ahead(self) -> None:
        if self._ahead is not None:
            self._ahead.close()
            self._ahead = None

    def close(self) -> None:
        self._drop_ahead()
        super().close()


class PartWriter:
    """Bytes written in order become the object ``key``: each full part is sent (a part of
    a multipart upload) by a thread while the next fills; ``write`` waits while
    ``in_flight`` parts are being sent, so memory holds at most ``in_flight + 1`` parts.
    ``close`` completes the object (one PUT when it is smaller than a part); ``abort``
    leaves nothing."""

    def __init__(self, client, bucket: str, key: str, part: int, in_flight: int, params: dict | None = None) -> None:
        self.client, self.bucket, self.key, self.part = client, bucket, key, part
        self.params = params or {}  # ContentType, …: the object's own
        self.size, self.upload_id = 0, None
        self._buffer = bytearray()
        self._slots = threading.BoundedSemaphore(in_flight)
        self._pool = ThreadPoolExecutor(in_flight, thread_name_prefix="s3-part")
        self._sent: list = []

    def write(self, data) -> None:
        self.size += len(data)
        view = memoryview(data)
        while len(view):
            room = self.part - len(self._buffer)
            self._buffer += view[:room]
            view = view[room:]
            if len(self._buffer) == self.part:  # handed over as it is (no copy); a new one fills
                body, self._buffer = self._buffer, bytearray()
                self._send(body)

    def _send(self, body: bytearray) -> None:
        if self.upload_id is None:
            self.upload_id = self.client.create_multipart_upload(Bucket=self.bucket, Key=self.key, **self.params)["UploadId"]
        for done in (f for f in self._sent if f.done()):
            done.result()  # a part that failed stops the upload now
        self._slots.acquire()
        self._sent.append(self._pool.submit(self._put_part, len(self._sent) + 1, body))

    def _put_part(self, number: int, body: bytearray) -> dict:
        try:
            answer = self.client.upload_part(Bucket=self.bucket, Key=self.key, UploadId=self.upload_id,
                                             PartNumber=number, Body=body)
            return {"PartNumber": number, "ETag": answer["ETag"]}
        finally:
            self._slots.release()

    def close(self) -> None:
        try:
            if self.upload_id is None:
                self.client.put_object(Bucket=self.bucket, Key=self.key, Body=self._buffer, **self.params)
                return
            if self._buffer:
                self._send(self._buffer)
            self._buffer = bytearray()
            parts = [f.result() for f in self._sent]
            self.client.complete_multipart_upload(Bucket=self.bucket, Key=self.key, UploadId=self.upload_id,
                                                  MultipartUpload={"Parts": parts})
        except BaseException:
            self.abort()
            raise
        finally:
            self._pool.shutdown(wait=False)

    def abort(self) -> None:
        self._buffer = bytearray()
        for future in self._sent:
            future.cancel()
        self._pool.shutdown(wait=True)
        if self.upload_id is not None:
            self.client.abort_multipart_upload(Bucket=self.bucket, Key=self.key, UploadId=self.upload_id)
            self.upload_id = None


class TraceObjectStorage(S3Storage):
    """S3Storage writing in bounded parts and reading by streaming (the module's docstring)."""

    def __init__(self, *, part_mb: int = 8, parts_in_flight: int = 2, **options) -> None:
        self.part_bytes, self.parts_in_flight = part_mb << 20, parts_in_flight
        options.setdefault("file_overwrite", True)
        # A store that is away fails the request in seconds, not after minutes of retries.
        options.setdefault("client_config", Config(
            connect_timeout=5, read_timeout=60, retries={"max_attempts": 3, "mode": "standard"},
            signature_version="s3v4", s3={"addressing_style": "path"} if options.get("endpoint_url") else None,
            # No CRC32 of each part sent or object read where S3 does not require one: the
            # checksums took a share of a core in the web process through a 1 GB upload.
            request_checksum_calculation="when_required", response_checksum_validation="when_required",
        ))
        super().__init__(**options)
        self._shared_lock = threading.Lock()
        self._shared_connection = None

    @property
    def connection(self):
        """The storage's one S3 resource, whatever the thread (the module's docstring)."""
        with self._shared_lock:
            if self._shared_connection is None:
                self._shared_connection = self._create_session().resource(
                    "s3", region_name=self.region_name, use_ssl=self.use_ssl, endpoint_url=self.endpoint_url,
                    config=self.client_config, verify=self.verify,
                )
            return self._shared_connection

    def __getstate__(self):
        state = super().__getstate__()
        state.pop("_shared_lock", None)
        state.pop("_shared_connection", None)
        return state

    def __setstate__(self, state):
        super().__setstate__(state)
        self._shared_lock, self._shared_connection = threading.Lock(), None

    def _save(self, name, content):
        """Through a :class:`PartWriter`: one PUT for a file under a part (most of a trace's
        results: s3transfer's manager cost ~0.1 s each), parts sent while the file is read
        for a larger one."""
        cleaned = clean_name(name)
        key = self._normalize_name(cleaned)
        params = self._get_write_parameters(key, content)
        if is_seekable(content):
            content.seek(0)
        content = ReadBytesWrapper(content)
        writer = PartWriter(self.bucket.meta.client, self.bucket_name, key, self.part_bytes, self.parts_in_flight, params)
        try:
            while data := content.read(SAVE_READ):
                writer.write(data)
        except BaseException:
            writer.abort()
            raise
        writer.close()
        return cleaned

    def _open(self, name, mode="rb"):
        if "w" in mode or "+" in mode or "a" in mode:
            return super()._open(name, mode)
        key = self._normalize_name(clean_name(name))
        obj = self.bucket.Object(key)
        try:
            size = obj.content_length  # a HEAD
        except ClientError as err:
            if err.response.get("ResponseMetadata", {}).get("HTTPStatusCode") == 404:
                raise FileNotFoundError(f"no object {key} in the traces bucket") from None
            raise
        reader = io.BufferedReader(ObjectReader(obj, size), buffer_size=READ_BUFFER)
        f = File(reader, name=name)
        f.size = size
        return f

    def writer(self, name: str, max_bytes: int = 0) -> PartWriter:
        """A :class:`PartWriter` making the object ``name`` of bytes as they come (at most
        ``max_bytes``, when known, or the TRACE_UPLOAD_MAX_MB limit), in parts of
        UPLOAD_PART, larger only where the 10,000 parts S3 allows need it."""
        most = max_bytes or settings.TRACE_UPLOAD_MAX_MB << 20
        part = max(UPLOAD_PART, math.ceil(most / MAX_PARTS))
        return PartWriter(self.bucket.meta.client, self.bucket_name, self._normalize_name(clean_name(name)),
                          part, self.parts_in_flight)

    def compose(self, name: str, parts: list[str]) -> bool:
        """Make ``name`` of the objects ``parts`` joined in order, inside the store (a
        multipart upload whose parts are copies of them, a large one in ranges of at most
        COPY_PART, several at once: no byte passes through this process). False, doing
        nothing, when a part but the last is under S3's 5 MB floor."""
        keys = [self._normalize_name(clean_name(p)) for p in parts]
        client = self.bucket.meta.client
        sizes = [client.head_object(Bucket=self.bucket_name, Key=k)["ContentLength"] for k in keys]
        if not keys or any(size < MIN_PART for size in sizes[:-1]):
            return False
        ranges = [(k, r) for k, size in zip(keys, sizes, strict=True) for r in _copy_ranges(size)]
        key = self._normalize_name(clean_name(name))
        upload = client.create_multipart_upload(Bucket=self.bucket_name, Key=key)["UploadId"]

        def copy(numbered) -> dict:
            number, (source, span) = numbered
            extra = {"CopySourceRange": span} if span else {}
            answer = client.upload_part_copy(Bucket=self.bucket_name, Key=key, UploadId=upload, PartNumber=number,
                                             CopySource={"Bucket": self.bucket_name, "Key": source}, **extra)
            return {"PartNumber": number, "ETag": answer["CopyPartResult"]["ETag"]}

        try:
            with ThreadPoolExecutor(max(2, self.parts_in_flight), thread_name_prefix="s3-copy") as pool:
                done = list(pool.map(copy, enumerate(ranges, start=1)))
            client.complete_multipart_upload(Bucket=self.bucket_name, Key=key, UploadId=upload,
                                             MultipartUpload={"Parts": done})
        except BaseException:
            client.abort_multipart_upload(Bucket=self.bucket_name, Key=key, UploadId=upload)
            raise
        return True

    def path(self, name):
        raise NotImplementedError("the object store has no local paths")


def _copy_ranges(size: int) -> list[str]:
    """The CopySourceRange of each part an object of ``size`` bytes is copied in ("" for
    the whole object): even ranges of at most COPY_PART, so none is under S3's floor."""
    count = max(1, math.ceil(size / COPY_PART))
    if count == 1:
        return [""]
    step = math.ceil(size / count)
    return [f"bytes={start}-{min(start + step, size) - 1}" for start in range(0, size, step)]
