"""What a trace is made from when it is uploaded: a :class:`Source` (a name, a size, its
bytes from the start on demand), whether it came as one multipart file or as the parts of a
resumable upload (traces/uploads/sessions.py) read in order (:class:`Parts`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import BinaryIO

from django.core.files import File


class BigChunks(File):
    """A File copied a megabyte at a time (Django's 64 kB chunks meant 16 times as many
    reads and writes, each a hand-over of the interpreter lock the pages wait for)."""

    DEFAULT_CHUNK_SIZE = 1 << 20


@dataclass
class Source:
    """What a trace is made from: a name, a size, and its bytes from the start on demand."""

    name: str
    size: int
    open: Callable[[], BinaryIO]
    uploads: tuple = ()  # the resumable upload it comes from (its reservation is its own)
    parts: tuple = ()  # the storage names of its parts, in order (a resumable upload's)
    trace_id: int | None = None  # the id reserved for its trace (its file is stored under it already)

    def as_file(self) -> File:
        """The bytes as a Django File for a storage's save (a multipart upload's own file,
        which a file system storage moves rather than copies)."""
        opened = self.open()
        return opened if isinstance(opened, File) else BigChunks(opened, name=self.name)

    @classmethod
    def of_file(cls, uploaded) -> Source:
        """A Django UploadedFile (a multipart upload, stored on disk by the upload handler,
        or in the object store: traces.uploads.handlers.StoredUpload, copied inside the store)."""
        if staging := getattr(uploaded, "staging", None):
            return cls(uploaded.name, uploaded.size, lambda: HeadFirst(uploaded.head, lambda: uploaded.store.open(staging, "rb"), uploaded.name),
                       parts=(staging,), trace_id=uploaded.trace_id)

        def rewound():
            uploaded.seek(0)
            return uploaded

        return cls(uploaded.name, uploaded.size, rewound)


class HeadFirst:
    """A file whose first bytes are at hand (``head``, kept as they were received): reads
    within them cost nothing, past them ``opened()`` is read from there on. A look at an
    uploaded file's head in an object store then sends no GET (moto answers a GET of a
    1 GB object by copying all of it, however little is read)."""

    def __init__(self, head: bytes, opened: Callable[[], BinaryIO], name: str) -> None:
        self.head, self.opened, self.pos, self.rest = head, opened, 0, None
        self.name = name  # the file's, for the engine's messages

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False

    def read(self, n: int = -1) -> bytes:
        if self.pos < len(self.head):
            end = len(self.head) if n is None or n < 0 else min(len(self.head), self.pos + n)
            data = self.head[self.pos:end]
            self.pos = end
            if n is None or n < 0:
                data += self.read(-1)
            return data
        if self.rest is None:
            self.rest = self.opened()
            self.rest.seek(len(self.head))
        return self.rest.read(n)

    def close(self) -> None:
        if self.rest is not None:
            self.rest.close()


class Parts:
    """The parts of an upload read in order as one stream (never more than a read's worth
    in memory)."""

    def __init__(self, store, names: list[str], name: str = "<upload>") -> None:
        self.store, self.names, self.current = store, list(names), None
        self.name = name  # the file's name, for the engine's messages

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False

    @property
    def closed(self) -> bool:  # asked by an object store's save, as of any file
        return False

    def read(self, n: int = -1) -> bytes:
        out = bytearray()
        while n < 0 or len(out) < n:
            if self.current is None:
                if not self.names:
                    break
                self.current = self.store.open(self.names.pop(0), "rb")
            data = self.current.read(-1 if n < 0 else n - len(out))
            if not data:
                self.current.close()
                self.current = None
                continue
            out += data
        return bytes(out)

    def close(self) -> None:
        if self.current is not None:
            self.current.close()
