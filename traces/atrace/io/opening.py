"""Opening a trace: plain or gzipped, from a path, bytes or a stream, with a guard against
gzip bombs; and sniffing which format the first bytes hold."""

from __future__ import annotations

import gzip
import io
import os
import zlib
from pathlib import Path
from typing import BinaryIO

from ..errors import TraceFormatError, TraceTooLargeError

#: Refuse inputs that decompress to more than this many bytes.
MAX_DECOMPRESSED_BYTES = 32 << 30
#: ... or that expand more than this ratio beyond the first 64 MB (a gzip bomb).
MAX_GZIP_RATIO = 200


class _GuardedReader(io.RawIOBase):
    """Counts decompressed bytes and stops a gzip bomb before it fills memory."""

    def __init__(self, inner: BinaryIO, raw: BinaryIO, where: str, max_bytes: int, max_ratio: float):
        self.inner, self.raw, self.where = inner, raw, where
        self.max_bytes, self.max_ratio = max_bytes, max_ratio
        self.total = 0

    def readable(self) -> bool:
        return True

    def read(self, n: int = -1) -> bytes:
        try:
            data = self.inner.read(n)
        except EOFError:
            raise TraceFormatError("truncated gzip stream", self.where) from None
        except (gzip.BadGzipFile, zlib.error, OSError) as exc:
            raise TraceFormatError(f"corrupt gzip stream ({exc})", self.where) from None
        self.total += len(data)
        if self.total > self.max_bytes:
            raise TraceTooLargeError(
                f"decompresses to more than {self.max_bytes} bytes", self.where
            )
        if self.total > (64 << 20):
            compressed = max(self.raw.tell(), 1)
            if self.total > self.max_ratio * compressed:
                raise TraceTooLargeError(
                    f"gzip bomb: {self.total} bytes decompressed from {compressed} "
                    f"(ratio over {self.max_ratio:g})",
                    self.where,
                )
        return data


def open_trace_stream(
    source: str | os.PathLike | bytes | BinaryIO,
    *,
    max_bytes: int = MAX_DECOMPRESSED_BYTES,
    max_ratio: float = MAX_GZIP_RATIO,
) -> tuple[BinaryIO, str, list]:
    """A binary stream of the (decompressed) trace text, a name for errors, and handles."""
    closers: list = []
    if isinstance(source, bytes | bytearray | memoryview):
        raw: BinaryIO = io.BytesIO(bytes(source))
        where = "<bytes>"
    elif isinstance(source, str | os.PathLike):
        where = str(source)
        try:
            raw = Path(source).open("rb")  # noqa: SIM115 - closed by the caller
        except OSError as exc:
            raise TraceFormatError(f"cannot open: {exc.strerror}", where) from None
        closers.append(raw)
    else:
        raw = source
        where = getattr(source, "name", "<stream>")
    magic = raw.read(2)
    if raw.seekable():
        raw.seek(-len(magic), io.SEEK_CUR)
    else:
        raw = _Prepend(magic, raw)
    if magic == b"\x1f\x8b":
        gz = gzip.GzipFile(fileobj=raw, mode="rb")
        closers.append(gz)
        stream = _GuardedReader(gz, raw, where, max_bytes, max_ratio)
    else:
        stream = _GuardedReader(raw, raw, where, max_bytes, float("inf"))
    return stream, where, closers


class _Prepend(io.RawIOBase):
    def __init__(self, head: bytes, rest: BinaryIO):
        self.head, self.rest, self.pos = head, rest, 0

    def readable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.pos

    def read(self, n: int = -1) -> bytes:
        if self.head:
            data, self.head = self.head, b""
            more = self.rest.read(n - len(data)) if n > len(data) else b""
            data += more
        else:
            data = self.rest.read(n)
        self.pos += len(data)
        return data


class Peeked(io.RawIOBase):
    """A stream with its first bytes read ahead (to sniff the format) and put back."""

    def __init__(self, head: bytes, rest: BinaryIO):
        self.head, self.rest = head, rest

    def readable(self) -> bool:
        return True

    def read(self, n: int = -1) -> bytes:
        if self.head:
            if n < 0 or n >= len(self.head):
                data, self.head = self.head, b""
                if n < 0:
                    return data + self.rest.read()
                return data + self.rest.read(n - len(data))
            data, self.head = self.head[:n], self.head[n:]
            return data
        return self.rest.read(n)


def sniff_format(head: bytes) -> str:
    """'chrome', 'kineto' or 'chakra' from the first bytes of a trace."""
    text = head.lstrip()
    if text[:1] == b"[":
        return "chrome"
    te = text.find(b'"traceEvents"')
    nodes = text.find(b'"nodes"')
    if nodes >= 0 and (te < 0 or nodes < te):
        return "chakra"
    if b'"schemaVersion"' in text or b'"distributedInfo"' in text or b'"deviceProperties"' in text:
        return "kineto"
    if b'"cpu_op"' in text or b'"cuda_runtime"' in text or b'"ac2g"' in text:
        return "kineto"
    return "chrome"
