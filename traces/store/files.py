"""Where a trace's files are: the one place that knows the layout of the "traces" storage.

Every file of trace ``<id>`` is in its folder ``<id>/`` (deleting the folder deletes the
trace's files):

``raw.<suffix>``
    The trace as captured (``raw.json.gz``) or uploaded (``raw.json``, ``raw.json.gz``, ``raw.et``).
``summary.json``, ``instances.bin``, ``args.bin``
    The breakdown and its drill-down (traces/store/results.py).
``chrome.json.gz``
    The Chrome trace export with the critical path marked, written last.
``view.*``
    The trace page's analyses (flame, timeline, critical path, correlation, comparison tables),
    as Atrace writes them (traces/store/page_data.py).
``job_digest.npz``
    When the trace is a rank of a distributed job: what the job's cross-rank step needs of it
    (traces/jobs/analysis.py).

A distributed job's own files are in ``jobs/<id>/`` (:class:`JobFiles`): ``report.json``
(the cross-rank report) and ``timeline.npz`` (every collective's arrival and end per rank).

The storage is Django's ``storages["traces"]`` (a folder under var/ by default; any storage
class through TRACE_STORAGE_BACKEND); nothing here reads the database.

No reader meets a half-written file: on a local folder each file is written under a hidden
temporary name beside its place (``.<name>.<random>.part``), flushed to the disk (when
TRACE_STORAGE_FSYNC) and renamed over the old one (a rename within a folder is atomic), so a
reader sees the old file or the new one whole, and a writer that fails midway leaves the old
one and removes its temporary file (what a killed process left goes with the trace's folder).
A multipart upload's own file is renamed into place the same way. An object store makes an
object only when its upload completes (traces/store/object_store.py). A reader that meets a
result it cannot read whole anyway (damaged, or cut short before results were written so)
raises :class:`ResultUnreadable`, which the web answers with 503 saying so
(dashboard/middleware.py).
"""

from __future__ import annotations

import contextlib
import errno
import io
import os
import secrets
import shutil
import sys
import tempfile
import zipfile
from pathlib import Path, PurePath

from django.conf import settings
from django.core.files.storage import storages
from django.utils._os import safe_makedirs

SUMMARY, INSTANCES, ARGS, CHROME = "summary.json", "instances.bin", "args.bin", "chrome.json.gz"
DIGEST = "job_digest.npz"
REPORT, TIMELINE = "report.json", "timeline.npz"


def store_errors() -> tuple[type[BaseException], ...]:
    """What a storage raises when it cannot be read or written: a full or failing disk, an
    object store that is away, refuses the credentials or answers with an error. botocore's
    errors only once botocore is loaded (an object store loads it): a process on the local
    folder never imports it."""
    boto = sys.modules.get("botocore.exceptions")
    return (OSError,) if boto is None else (OSError, boto.BotoCoreError, boto.ClientError)


class ResultUnreadable(Exception):
    """A stored result that cannot be read whole: the message names it and why."""

    retry_after_s = 30


@contextlib.contextmanager
def reading_result(owner: str, what: str):
    """Around the read and parse of one stored result: what cannot be read whole (a cut or
    damaged file, a storage that failed the read) raises ResultUnreadable naming ``owner``
    ("trace 12") and ``what``; a missing file stays FileNotFoundError (each reader says what
    its absence means)."""
    try:
        yield
    except FileNotFoundError:
        raise
    except (ValueError, EOFError, zipfile.BadZipFile, *store_errors()) as exc:
        raise ResultUnreadable(
            f"The stored {what} of {owner} could not be read ({exc}); it may be damaged: "
            "try again shortly, and if it stays so, upload the trace again."
        ) from exc


RAW_SUFFIXES = {".json": "json", ".gz": "json.gz", ".et": "et", ".pb": "et"}


class TraceFiles:
    """The files of one trace in the traces storage."""

    def __init__(self, trace_id: int, storage=None) -> None:
        self.trace_id = trace_id
        self.storage = storage if storage is not None else storages["traces"]

    @property
    def folder(self) -> str:
        return str(self.trace_id)

    @property
    def owner(self) -> str:
        """Whose files these are, in words (messages)."""
        return f"trace {self.trace_id}"

    def name(self, file: str) -> str:
        """The storage name of one of the trace's files (``"12/summary.json"``)."""
        return f"{self.trace_id}/{file}"

    def raw_name(self, original: str = "", head: bytes = b"") -> str:
        """The name the raw trace is stored under: gzip by its magic bytes, else by the
        suffix of the file's ``original`` name (JSON when unknown)."""
        suffix = "json.gz" if head[:2] == b"\x1f\x8b" else RAW_SUFFIXES.get(PurePath(original).suffix, "json")
        return self.name(f"raw.{suffix}")

    def exists(self, file: str) -> bool:
        return self.storage.exists(self.name(file))

    def open(self, file: str, mode: str = "rb"):
        return self.storage.open(self.name(file), mode)

    def save(self, file: str, data: bytes) -> int:
        """Writes ``data`` (replacing any earlier copy, e.g. of an interrupted attempt);
        returns its size."""
        self.save_stream(self.name(file), io.BytesIO(data))
        return len(data)

    def save_stream(self, name: str, stream) -> str:
        """Copies ``stream`` (a file, read chunk by chunk) to the storage ``name``, replacing
        what was there whole (the module's docstring); returns the name stored."""
        try:
            path = Path(self.storage.path(name))
        except NotImplementedError:  # an object store: its save replaces the object whole
            path = None
        if path is not None:
            modes = (getattr(self.storage, "file_permissions_mode", None),
                     getattr(self.storage, "directory_permissions_mode", None))
            upload = getattr(stream, "temporary_file_path", None)  # a multipart upload's own file: moved
            if upload is None or not move_file(Path(upload()), path, *modes):
                replace_file(path, stream, *modes)
            return name
        if not getattr(self.storage, "file_overwrite", False) and self.storage.exists(name):
            self.storage.delete(name)  # another storage class, which would pick a new name
        return self.storage.save(name, stream)

    def save_source(self, name: str, source) -> str:
        """Stores an upload's bytes (a traces.uploads.sources.Source) as ``name``: an object
        store joins a resumable upload's parts itself, others get them streamed."""
        compose = getattr(self.storage, "compose", None)
        parts = list(getattr(source, "parts", ()))
        if parts == [name]:  # stored there already (a multipart POST to an object store)
            return name
        if compose is not None and parts and compose(name, parts):
            return name
        return self.save_stream(name, source.as_file())

    def local_folder(self) -> Path | None:
        """The trace's folder on the local file system; None for a storage without local
        paths (an object store)."""
        try:
            return Path(self.storage.path(self.folder))
        except NotImplementedError:
            return None

    def listdir(self) -> list[str]:
        try:
            _dirs, files = self.storage.listdir(self.folder)
        except FileNotFoundError:
            return []
        return files

    def local_copy(self, prefix: str, into: Path, max_bytes: int | None = None) -> Path:
        """A local copy of the files whose names start with ``prefix``, made once in the
        folder ``into`` (for storages without local paths). ``max_bytes``: the most the
        copies beside it in ``into``'s parent may hold; the least recently used go first."""
        if into.exists():
            with contextlib.suppress(OSError):
                into.touch()  # used now: evicted last
            return into
        into.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=into.parent, prefix=".copying-"))
        try:
            for file in self.listdir():
                if file.startswith(prefix):
                    with self.open(file) as src, (tmp / file).open("wb") as dst:
                        shutil.copyfileobj(src, dst)
            tmp.rename(into)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            if not into.exists():
                raise
        if max_bytes is not None:
            trim_cache(into.parent, max_bytes, keep=into)
        return into

    def download_url(self, name: str, min_bytes: int, filename: str = "") -> str | None:
        """A URL the client may fetch the stored ``name`` from directly (an object store's
        presigned URL), when it is at least ``min_bytes``; None to serve it through the web."""
        if self.local_folder() is not None:
            return None
        if self.storage.size(name) < min_bytes:
            return None
        disposition = {"ResponseContentDisposition": f'attachment; filename="{filename}"'} if filename else None
        return self.storage.url(name, parameters=disposition)

    def delete_all(self) -> None:
        """Deletes every file of the trace, and its folder."""
        for file in self.listdir():
            self.storage.delete(self.name(file))
        folder = self.local_folder()
        if folder is not None:
            for left in folder.glob(f"{VIEWS_TEMPORARY}*"):  # a writer killed midway left it
                shutil.rmtree(left, ignore_errors=True)
            with contextlib.suppress(OSError):
                folder.rmdir()  # file systems keep empty folders


COPY_CHUNK = 1 << 20
TEMPORARY_SUFFIX = ".part"
VIEWS_TEMPORARY = ".views-"  # the hidden folder the trace page's views are written in (page_data.py)


def replace_file(path: Path, stream, mode: int | None = None, folder_mode: int | None = None) -> None:
    """Write ``stream`` to ``path`` whole: into a temporary file beside it, flushed to the
    disk (when TRACE_STORAGE_FSYNC), then renamed over it. Anything raised midway (a full
    disk, a failing source) leaves ``path`` as it was and no temporary file. ``mode``: the
    file's permissions (else the process's umask decides); ``folder_mode``: a new folder's
    (as the storage's own)."""
    _make_folder(path.parent, folder_mode)
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(6)}{TEMPORARY_SUFFIX}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "wb") as out:
            if hasattr(stream, "seekable") and stream.seekable():
                stream.seek(0)
            while data := stream.read(COPY_CHUNK):
                out.write(data)
            out.flush()
            if settings.TRACE_STORAGE_FSYNC:
                os.fsync(out.fileno())
        if mode is not None:
            tmp.chmod(mode)
        tmp.replace(path)  # os.replace: atomic within a folder
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


def move_file(source: Path, path: Path, mode: int | None = None, folder_mode: int | None = None) -> bool:
    """Rename the finished file ``source`` over ``path`` (flushed to the disk first, when
    TRACE_STORAGE_FSYNC); False, leaving it, when they are on different file systems (the
    caller copies it then)."""
    _make_folder(path.parent, folder_mode)
    if settings.TRACE_STORAGE_FSYNC:
        flush_to_disk(source)
    if mode is not None:
        source.chmod(mode)
    try:
        source.replace(path)
    except OSError as exc:
        if exc.errno == errno.EXDEV:
            return False
        raise
    return True


def flush_to_disk(path: Path) -> None:
    with path.open("rb") as f:
        os.fsync(f.fileno())


def _make_folder(folder: Path, mode: int | None) -> None:
    if not folder.is_dir():
        safe_makedirs(folder, 0o777 if mode is None else mode, exist_ok=True)


def trim_cache(root: Path, max_bytes: int, keep: Path | None = None) -> int:
    """Delete the least recently used copies (folders) in ``root`` until they hold at most
    ``max_bytes`` (``keep``, the one just used, stays); returns the number deleted."""
    copies = []
    for folder in root.iterdir():
        if folder.is_dir() and not folder.name.startswith("."):
            with contextlib.suppress(OSError):
                size = sum(f.stat().st_size for f in folder.iterdir())
                copies.append((folder.stat().st_mtime, size, folder))
    total = sum(size for _t, size, _f in copies)
    deleted = 0
    for _mtime, size, folder in sorted(copies, key=lambda c: c[0]):
        if total <= max_bytes:
            break
        if folder == keep:
            continue
        shutil.rmtree(folder, ignore_errors=True)
        total -= size
        deleted += 1
    return deleted


class JobFiles(TraceFiles):
    """The files of one distributed job, in ``jobs/<id>/`` of the traces storage."""

    @property
    def folder(self) -> str:
        return f"jobs/{self.trace_id}"

    @property
    def owner(self) -> str:
        return f"job {self.trace_id}"

    def name(self, file: str) -> str:
        return f"{self.folder}/{file}"
