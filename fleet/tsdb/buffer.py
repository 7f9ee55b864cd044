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
number of samples and why. Making room happens under the lock, so that no batch is evicted
while a sender reads it.

`dropped.log` is bounded: past DROPPED_LOG_MAX_BYTES it becomes `dropped.log.1` (the older
ones move up to `.3`, the oldest goes). What was ever dropped is counted in `dropped.count`
(JSON: batches and samples), updated with each line, so that counting never reads the logs.

A batch that cannot be written (the disk is full) leaves nothing behind: its temporary file
is removed and its samples are counted as lost, as every dropped batch is (`Drop`). Temporary
files a crashed process left are removed when a writer starts (`clean_temporaries`).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import logging
import os
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

log = logging.getLogger(__name__)

SUFFIX = ".batch"
MAGIC = b"asicmon-remote-write-1"
TEMPORARY = ".tmp-"
STALE_TEMPORARY_S = 600  # no write of a batch takes this long: its writer is gone
DISK_FULL = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)
DROPPED_LOG = "dropped.log"
DROPPED_COUNT = "dropped.count"
DROPPED_LOG_MAX_BYTES = 1 << 20  # then dropped.log is rotated
DROPPED_LOGS_KEPT = 3  # rotated logs kept: dropped.log.1 (the newest) to .3


@dataclass(frozen=True, slots=True)
class Batch:
    """One cycle's samples of one writer, ready to send (fleet/tsdb/writes.py makes them)."""

    cycle_ms: int
    scope: str
    samples: int
    body: bytes  # the snappy-compressed WriteRequest


@dataclass(frozen=True, slots=True)
class Drop:
    """Samples that will never reach the store, and why (`kind`: spool_full, too_large,
    disk_full, spool_error, malformed). `entry`: the spool file they came from, None for a
    batch that was never in the spool."""

    kind: str
    samples: int
    reason: str
    entry: Path | None = None


@dataclass
class Spool:
    folder: Path | str
    max_bytes: int
    log_max_bytes: int = DROPPED_LOG_MAX_BYTES
    drops: list[Drop] = field(default_factory=list, init=False, repr=False)  # dropped since take_drops()
    _depth: int = field(default=0, init=False, repr=False)  # how deeply this object holds the lock

    def __post_init__(self):
        self.folder = Path(self.folder)

    # --- Adding and reading ----------------------------------------------------------

    def append(self, batch: Batch, origin: Path | None = None) -> Path | None:
        """Keep `batch` durably; returns its file, or None when it was dropped (larger than
        the whole spool, or the disk is full: nothing of it is left behind). `origin`: the
        spool file the batch is a part of, if any (for what a drop names)."""
        header = b"%s %d %d %s\n" % (MAGIC, batch.cycle_ms, batch.samples, batch.scope.encode())
        size = len(header) + len(batch.body)
        if size > self.max_bytes:
            self.note_dropped(batch, f"larger than the whole spool ({size} > {self.max_bytes} bytes)", "too_large", origin)
            return None
        name = f"{batch.cycle_ms:013d}-{time.time_ns():019d}-{os.getpid()}{SUFFIX}"
        temporary = self.folder / f"{TEMPORARY}{name}"
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            self._make_room(size)
            with temporary.open("wb") as f:
                f.write(header)
                f.write(batch.body)
                f.flush()
                os.fsync(f.fileno())
            final = self.folder / name
            temporary.rename(final)
        except OSError as exc:
            with contextlib.suppress(OSError):
                temporary.unlink(missing_ok=True)
            kind = "disk_full" if exc.errno in DISK_FULL else "spool_error"
            self.note_dropped(batch, f"the spool cannot be written: {exc}", kind, origin)
            return None
        try:
            self._sync_folder()
        except OSError as exc:  # the batch is in place; only its durability across a crash is in doubt
            log.warning("spool: %s could not be synced: %s", self.folder, exc)
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

    def _sizes(self) -> list[tuple[Path, int]]:
        sizes = []
        for entry in self.entries():
            with contextlib.suppress(FileNotFoundError):
                sizes.append((entry, entry.stat().st_size))
        return sizes

    def _make_room(self, size: int) -> None:
        """Drop the oldest batches until `size` more bytes fit, under the lock (a sender may
        be reading them; waits for it when another process holds the lock)."""
        if sum(s for _, s in self._sizes()) + size <= self.max_bytes:
            return
        with self.lock(blocking=True):
            sizes = self._sizes()
            total = sum(s for _, s in sizes)
            for entry, entry_size in sizes:
                if total + size <= self.max_bytes:
                    break
                batch = self.read(entry)
                if batch is not None:
                    self.note_dropped(batch, f"the spool is full ({self.max_bytes // (1024 * 1024)} MiB)",
                                      "spool_full", entry)
                self.remove(entry)
                total -= entry_size

    def note_dropped(self, batch: Batch, reason: str, kind: str = "malformed", entry: Path | None = None) -> None:
        """Say that a batch will never reach the store: a warning (an error when the disk is
        full), a line in dropped.log (unless the disk is full), its batch and samples counted
        in dropped.count, and a `Drop` in `drops`."""
        when = datetime.fromtimestamp(batch.cycle_ms / 1000, tz=UTC).isoformat()
        line = f"{datetime.now(tz=UTC).isoformat()} dropped cycle {when} of {batch.scope}: {batch.samples} samples, {reason}"
        log.log(logging.ERROR if kind in ("disk_full", "spool_error") else logging.WARNING, "time-series spool: %s", line)
        self.drops.append(Drop(kind, batch.samples, reason, entry))
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            with self._counts() as counts:
                counts["batches"] += 1
                counts["samples"] += batch.samples
                try:
                    self._log_line(line)
                except OSError as exc:
                    log.error("time-series spool: dropped.log cannot be written (%s); the line above is the only "
                              "record", exc)
        except OSError as exc:
            log.error("time-series spool: %s cannot be written (%s)", DROPPED_COUNT, exc)

    def _log_line(self, line: str) -> None:
        """A line at the end of dropped.log, rotated once past log_max_bytes (under _counts' lock)."""
        with (self.folder / DROPPED_LOG).open("a") as f:
            f.write(line + "\n")
            full = f.tell() > self.log_max_bytes
        if full:
            self._rotate_log()

    def take_drops(self) -> list[Drop]:
        """The drops since the last call."""
        drops, self.drops = self.drops, []
        return drops

    def clean_temporaries(self, *, stale_s: float = STALE_TEMPORARY_S) -> int:
        """Remove the temporary files of writes that never finished: their process is gone
        (the pid in the name is not running here), or they are older than `stale_s`.
        Returns how many."""
        removed = 0
        try:
            found = [p for p in self.folder.iterdir() if p.name.startswith(TEMPORARY)]
        except FileNotFoundError:
            return 0
        now = time.time()
        for path in found:
            with contextlib.suppress(FileNotFoundError):
                if _writer_gone(path.name) or now - path.stat().st_mtime > stale_s:
                    path.unlink()
                    removed += 1
        if removed:
            log.warning("time-series spool: removed %d unfinished temporary files from %s", removed, self.folder)
        return removed

    def dropped(self) -> list[str]:
        """The lines of dropped.log and of the rotated logs kept, oldest first."""
        lines = []
        for path in self._logs():
            with contextlib.suppress(FileNotFoundError):
                lines += path.read_text().splitlines()
        return lines

    def dropped_samples(self) -> int:
        """Samples in every batch ever dropped (dropped.count)."""
        return self.dropped_counts()["samples"]

    def dropped_counts(self) -> dict[str, int]:
        """{"batches": …, "samples": …}: every batch ever dropped, rotated logs included."""
        if not (self.folder / DROPPED_COUNT).exists():
            return {"batches": 0, "samples": 0} if not self._logs() else self._counted_from_logs()
        with self._counts() as counts:
            return dict(counts)

    def _logs(self) -> list[Path]:
        """dropped.log's files that exist, oldest first."""
        names = [f"{DROPPED_LOG}.{n}" for n in range(DROPPED_LOGS_KEPT, 0, -1)] + [DROPPED_LOG]
        return [self.folder / name for name in names if (self.folder / name).exists()]

    def _rotate_log(self) -> None:
        """dropped.log becomes dropped.log.1, .1 becomes .2 …, the oldest kept is replaced."""
        for n in range(DROPPED_LOGS_KEPT - 1, 0, -1):
            with contextlib.suppress(FileNotFoundError):
                (self.folder / f"{DROPPED_LOG}.{n}").rename(self.folder / f"{DROPPED_LOG}.{n + 1}")
        (self.folder / DROPPED_LOG).rename(self.folder / f"{DROPPED_LOG}.1")

    def _counted_from_logs(self) -> dict[str, int]:
        """The counts the logs kept hold (a spool from before dropped.count, or a count file
        that cannot be read): a line cut short by a full disk is left out."""
        counts = {"batches": 0, "samples": 0}
        for line in self.dropped():
            with contextlib.suppress(IndexError, ValueError):
                counts["samples"] += int(line.split(": ", 1)[1].split(" samples", 1)[0])
                counts["batches"] += 1
        return counts

    @contextlib.contextmanager
    def _counts(self):
        """dropped.count's counts, locked (flock) against other processes' drops; what the
        block leaves in the dict is written back in place (a few bytes over the old ones: once
        the file has its block, a full disk does not stop it)."""
        fd = os.open(self.folder / DROPPED_COUNT, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            raw = os.pread(fd, 256, 0)
            try:
                counts = json.loads(raw)
                counts = {"batches": int(counts["batches"]), "samples": int(counts["samples"])}
            except (ValueError, KeyError, TypeError):
                if raw:
                    log.warning("time-series spool: %s is unreadable (%r); counted again from the logs kept",
                                self.folder / DROPPED_COUNT, raw[:80])
                counts = self._counted_from_logs()
            before = dict(counts)
            yield counts
            if counts != before or not raw:
                data = json.dumps(counts).encode()
                os.pwrite(fd, data, 0)
                os.ftruncate(fd, len(data))
        finally:
            os.close(fd)  # and the lock with it

    # --- One sender at a time -------------------------------------------------------------

    @contextlib.contextmanager
    def lock(self, *, blocking: bool):
        """Hold the spool's lock (yields True), or yield False at once if another process
        holds it and not `blocking`. Taken again through the same object, it is held already."""
        if self._depth:
            self._depth += 1
            try:
                yield True
            finally:
                self._depth -= 1
            return
        self.folder.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.folder / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
            except BlockingIOError:
                yield False
                return
            self._depth = 1
            try:
                yield True
            finally:
                self._depth = 0
                fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)

    def _sync_folder(self) -> None:
        fd = os.open(self.folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _writer_gone(name: str) -> bool:
    """Whether the process that wrote temporary file `name` (…-<pid>.batch) is gone."""
    try:
        pid = int(name.removesuffix(SUFFIX).rsplit("-", 1)[1])
    except (IndexError, ValueError):
        return False
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False
