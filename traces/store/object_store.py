"""The traces storage in an S3-compatible object store (AWS S3, Ceph RGW, MinIO, R2, GCS's
S3 API), through django-storages' S3Storage with two changes for large traces:

- Writes go up in parts of ``TRACE_S3_PART_MB`` (a multipart upload past one part), at
  most ``TRACE_S3_PARTS_IN_FLIGHT`` parts in memory at once: a 1 GB upload holds a few
  parts, never the file. The object appears only when its upload completes, so a writer
  killed midway leaves no object (its parts wait for the bucket's lifecycle rule that
  aborts incomplete multipart uploads; docs/deploy.md).
- Reads stream: ``open(name, "rb")`` is a buffered reader over one ranged GET from the
  position read to the end of the object, reopened after a seek, instead of S3Storage's
  copy of the whole object into a temporary file. A worker parses a trace as it arrives;
  a page's ranged read (a slice of the instance file) fetches that slice.

Which storage is used is settings' ``STORAGES["traces"]`` (``TRACE_STORAGE=s3://…``).
"""

from __future__ import annotations

import io

from boto3.s3.transfer import TransferConfig
from botocore.config import Config
from botocore.exceptions import ClientError
from django.core.files import File
from storages.backends.s3 import S3Storage
from storages.utils import clean_name, is_seekable

READ_BUFFER = 1 << 20
MIN_PART = 5 << 20  # S3's smallest part but the last


class ObjectReader(io.RawIOBase):
    """A read-only, seekable file over one object: each run of sequential reads is one GET
    streaming from where it starts."""

    def __init__(self, obj, size: int) -> None:
        self._obj, self._size = obj, size
        self._pos, self._body = 0, None

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
            self._drop_body()
            self._pos = pos
        return self._pos

    def readinto(self, buffer) -> int:
        if self._pos >= self._size:
            return 0
        if self._body is None:
            self._body = self._obj.get(Range=f"bytes={self._pos}-")["Body"]
        data = self._body.read(len(buffer))
        n = len(data)
        buffer[:n] = data
        self._pos += n
        if n == 0:  # the object ended early (it was replaced): stop here
            self._size = self._pos
        return n

    def _drop_body(self) -> None:
        if self._body is not None:
            self._body.close()
            self._body = None

    def close(self) -> None:
        self._drop_body()
        super().close()


class FullReads:
    """A stream whose reads return all the bytes asked for (fewer only at its end). The
    upload manager takes a short read for the end of the file: at the first one it reads
    the whole rest into memory in one call, and it would send a short part, which S3
    refuses; request bodies and the parts of resumable uploads read short."""

    closed = False

    def __init__(self, stream) -> None:
        self.stream = stream

    def seekable(self) -> bool:
        return False

    def read(self, n: int = -1) -> bytes:
        if n is None or n < 0:  # asked after a short read, so at the end of the stream
            return self.stream.read()
        first = self.stream.read(n)
        if len(first) >= n or not first:
            return first  # the usual case: no copy
        chunks, got = [first], len(first)
        while got < n and (data := self.stream.read(n - got)):
            chunks.append(data)
            got += len(data)
        return b"".join(chunks)


class TraceObjectStorage(S3Storage):
    """S3Storage writing in bounded parts and reading by streaming (the module's docstring)."""

    def __init__(self, *, part_mb: int = 8, parts_in_flight: int = 2, **options) -> None:
        part = part_mb << 20
        if "transfer_config" not in options:
            config = TransferConfig(multipart_threshold=part, multipart_chunksize=part, use_threads=parts_in_flight > 1,
                                    max_concurrency=parts_in_flight, max_io_queue=parts_in_flight)
            config.max_in_memory_upload_chunks = parts_in_flight  # s3transfer's own knobs
            config.max_in_memory_download_chunks = parts_in_flight
            options["transfer_config"] = config
        options.setdefault("file_overwrite", True)
        # A store that is away fails the request in seconds, not after minutes of retries.
        options.setdefault("client_config", Config(
            connect_timeout=5, read_timeout=60, retries={"max_attempts": 3, "mode": "standard"},
            signature_version="s3v4", s3={"addressing_style": "path"} if options.get("endpoint_url") else None,
        ))
        super().__init__(**options)

    def _save(self, name, content):
        if is_seekable(content):
            content.seek(0)
        return super()._save(name, FullReads(content))

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

    def compose(self, name: str, parts: list[str]) -> bool:
        """Make ``name`` of the objects ``parts`` joined in order, inside the store (a
        multipart upload whose parts are copies of them: no byte passes through this
        process). False, doing nothing, when a part but the last is under S3's 5 MB floor."""
        keys = [self._normalize_name(clean_name(p)) for p in parts]
        client = self.bucket.meta.client
        sizes = [client.head_object(Bucket=self.bucket_name, Key=k)["ContentLength"] for k in keys]
        if not keys or any(size < MIN_PART for size in sizes[:-1]):
            return False
        key = self._normalize_name(clean_name(name))
        upload = client.create_multipart_upload(Bucket=self.bucket_name, Key=key)["UploadId"]
        try:
            done = [{"PartNumber": n, "ETag": client.upload_part_copy(
                Bucket=self.bucket_name, Key=key, UploadId=upload, PartNumber=n,
                CopySource={"Bucket": self.bucket_name, "Key": k})["CopyPartResult"]["ETag"]}
                for n, k in enumerate(keys, start=1)]
            client.complete_multipart_upload(Bucket=self.bucket_name, Key=key, UploadId=upload,
                                             MultipartUpload={"Parts": done})
        except BaseException:
            client.abort_multipart_upload(Bucket=self.bucket_name, Key=key, UploadId=upload)
            raise
        return True

    def path(self, name):
        raise NotImplementedError("the object store has no local paths")
