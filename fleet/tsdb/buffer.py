"""The spool: a poll's batches wait here, on disk, while the store is down or slow.

A folder (TSDB_BUFFER_DIR) of files, one per batch (a request of one writer's cycle: the
compressed remote-write request exactly as it will be sent, after a one-line header). A batch is
written to a temporary file, fsynced, renamed into place and the folder fsynced, so a batch
is either whole in the spool or not there, across crashes and restarts. Files are named by
the cycle's timestamp, then the time they were added: sending them in name order sends each
writer's cycles in order. A lock file (flock) lets one process at a time send from the spool.

The spool is bounded (TSDB_BUFFER_MAX_MB): when a batch would not fit, the oldest batches
are dropped to make room, and every batch dropped (for room, or refused by the store) is
logged as a warning and written as a line to `dropped.log` in the folder: its cycle, writer,
number of samples and why.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

log = logging.getLogger(__name__)

SUFFIX = ".batch"
MAGIC = b"asicmon-remote-write-1"


@dataclass(frozen=True, slots=True)
class Batch:
    """One cycle's samples of one writer, ready to send (fleet/tsdb/writes.py makes them)."""

    cycle_ms: int
    scope: str
    samples: int
    body: bytes  # the snappy-compressed WriteRequest


class Spool:
    def __init__(self, folder: Path | str, max_bytes: int):
        self.folder = Path(folder)
        self.max_bytes = max_bytes

    # --- Adding and reading ----------------------------------------------------------

    def append(self, batch: Batch) -> Path | None:
        """Keep `batch` durably; returns its file (None if it alone is larger than the spool)."""
        self.folder.mkdir(parents=True, exist_ok=True)
        header = b"%s %d %d %s\n" % (MAGIC, batch.cycle_ms, batch.samples, batch.scope.encode())
        size = len(header) + len(batch.body)
        if size > self.max_bytes:
            self.note_dropped(batch, f"larger than the whole spool ({size} > {self.max_bytes} bytes)")
            return None
        self._make_room(size)
        name = f"{batch.cycle_ms:013d}-{time.time_ns():019d}-{os.getpid()}{SUFFIX}"
        temporary = self.folder / f".tmp-{name}"
        with temporary.open("wb") as f:
            f.write(header)
            f.write(batch.body)
            f.flush()
            os.fsync(f.fileno())
        final = self.folder / name
        temporary.rename(final)
        self._sync_folder()
        return final

    def entries(self) -> list[Path]:
        """The waiting batches' files, oldest cycle first."""
        try:
            return sorted(p for p in self.folder.iterdir() if p.name.endswith(SUFFIX) and not p.name.startswith("."))
        except FileNotFoundError:
            return []

    def read(self, entry: Path) -> Batch | None:
        """The batch in `entry` (None if it is gone, or unreadable: then it is set aside)."""
        try:
            data = entry.read_bytes()
        except FileNotFoundError:
            return None
        header, _, body = data.partition(b"\n")
        parts = header.split(b" ", 3)
        if len(parts) != 4 or parts[0] != MAGIC:
            log.error("spool: %s is not a batch; moved aside to %s.bad", entry, entry)
            entry.rename(entry.with_name(entry.name + ".bad"))
            return None
        return Batch(int(parts[1]), parts[3].decode(), int(parts[2]), body)

    def remove(self, entry: Path) -> None:
        entry.unlink(missing_ok=True)

    def count(self) -> int:
        return len(self.entries())

    def size(self) -> int:
        """Bytes the waiting batches take."""
        total = 0
        for entry in self.entries():
            with contextlib.suppress(FileNotFoundError):
                total += entry.stat().st_size
        return total

    # --- Bounds and what was dropped --------------------------------------------------

    def _make_room(self, size: int) -> None:
        sizes = []
        for entry in self.entries():
            with contextlib.suppress(FileNotFoundError):
                sizes.append((entry, entry.stat().st_size))
        total = sum(s for _, s in sizes)
        for entry, entry_size in sizes:
            if total + size <= self.max_bytes:
                break
            batch = self.read(entry)
            if batch is not None:
                self.note_dropped(batch, f"the spool is full ({self.max_bytes // (1024 * 1024)} MiB)")
            self.remove(entry)
            total -= entry_size

    def note_dropped(self, batch: Batch, reason: str) -> None:
        """Say that a batch will never reach the store: a warning, and a line in dropped.log."""
        when = datetime.fromtimestamp(batch.cycle_ms / 1000, tz=UTC).isoformat()
        line = f"{datetime.now(tz=UTC).isoformat()} dropped cycle {when} of {batch.scope}: {batch.samples} samples, {reason}"
        log.warning("time-series spool: %s", line)
        self.folder.mkdir(parents=True, exist_ok=True)
        with (self.folder / "dropped.log").open("a") as f:
            f.write(line + "\n")

    def dropped(self) -> list[str]:
        """The lines of dropped.log: every batch dropped so far."""
        try:
            return (self.folder / "dropped.log").read_text().splitlines()
        except FileNotFoundError:
            return []

    def dropped_samples(self) -> int:
        return sum(int(line.split(": ", 1)[1].split(" samples", 1)[0]) for line in self.dropped())

    # --- One sender at a time -------------------------------------------------------------

    @contextlib.contextmanager
    def lock(self, *, blocking: bool):
        """Hold the spool's lock (yields True), or yield False at once if another process
        holds it and not `blocking`."""
        self.folder.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.folder / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
            except BlockingIOError:
                yield False
                return
            try:
                yield True
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)

    def _sync_folder(self) -> None:
        fd = os.open(self.folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
