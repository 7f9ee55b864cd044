"""What an agent's error sources had read, kept across its restarts (no Django).

One small JSON file: where the kernel log was left (``/dev/kmsg``: the last record's sequence
number; a growing file: the offset of the first byte not handed on) and amdgpu's RAS counters'
last readings by bus address. A restarted agent resumes the kernel log there and counts RAS
errors from those readings, so errors that came while it was down are read, not taken as a
new starting point.

Only what still means something is resumed: kmsg sequence numbers and RAS counts start again
when the machine boots (a different boot id: the log is read from the end and the counters'
first reading is their start, as on a first run), and a log file's offset only holds for the
same file (its inode). Records ``/dev/kmsg`` overwrote while the agent was down are counted
as lost by the reader (`fleet.asicmon.errors.sources.KernelLog`: the gap in the sequence).

    state = SourceState(Path("/var/lib/asicmon/error-sources.json"))
    log = KernelLog(KMSG, resume=state.log_position(KMSG))
    ras = RasCounters(files, address, baseline=state.ras_baseline(address))
    ...
    state.note_log(KMSG, log.position)
    state.save()
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import tempfile
from pathlib import Path

from fleet.asicmon.errors.kernel_log import normalise_address

__all__ = ["BOOT_ID", "SourceState", "current_boot_id"]

log = logging.getLogger(__name__)

BOOT_ID = "/proc/sys/kernel/random/boot_id"
VERSION = 1


def current_boot_id(path: str = BOOT_ID) -> str:
    """This boot's id ("" where the kernel does not say)."""
    try:
        return Path(path).read_text().strip()
    except OSError:
        return ""


def _inode(path: str) -> int | None:
    try:
        return Path(path).stat().st_ino
    except OSError:
        return None


class SourceState:
    """The kernel log's position and the RAS baselines, loaded from ``path`` (a missing or
    unreadable file: nothing to resume) and written back by `save`."""

    def __init__(self, path: str | os.PathLike, boot_id: str | None = None) -> None:
        self.path = Path(path)
        self.boot_id = current_boot_id() if boot_id is None else boot_id
        data = self._load()
        same_boot = bool(self.boot_id) and data.get("boot_id") == self.boot_id
        self.logs: dict[str, dict] = data.get("logs", {})
        # RAS counts and kmsg sequence numbers are this boot's: another boot's mean nothing
        self.ras: dict[str, dict[str, int]] = data.get("ras", {}) if same_boot else {}
        # The kernel logs read in a boot before this one: read from their start now, for the
        # driver's lines logged while the machine booted (did the reboot cure the device?).
        self._rebooted_logs = set() if same_boot or not data.get("boot_id") else {
            p for p, entry in self.logs.items() if entry.get("kmsg")}
        if not same_boot:
            self.logs = {p: entry for p, entry in self.logs.items() if not entry.get("kmsg")}

    def _load(self) -> dict:
        try:
            data = json.loads(self.path.read_text())
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            log.warning("error-source state %s not read (%s): starting afresh", self.path, exc)
            return {}
        return data if isinstance(data, dict) and data.get("version") == VERSION else {}

    def log_position(self, path: str) -> int | None:
        """Where to resume ``path``; None: nothing to resume (read from its end)."""
        entry = self.logs.get(path)
        if entry is None:
            return None
        if not entry.get("kmsg") and entry.get("inode") != _inode(path):
            return None  # another file now (rotated while we were down): read it afresh
        return int(entry["position"])

    def read_from_start(self, path: str) -> bool:
        """Whether the kernel log ``path`` is to be read from its start: it was read in an
        earlier boot (the machine rebooted since), so its boot-time lines are new."""
        return path in self._rebooted_logs

    def note_log(self, path: str, position: int | None, *, kmsg: bool) -> None:
        if position is not None:
            self.logs[path] = {"position": int(position), "kmsg": kmsg, "inode": None if kmsg else _inode(path)}

    def ras_baseline(self, address: str) -> dict[str, int]:
        """The RAS counters' last readings of the device at ``address``, a dict the counters
        update in place (so `save` writes what they last read)."""
        return self.ras.setdefault(normalise_address(address), {})

    def save(self) -> None:
        """Writes the state (atomically: a crash mid-write leaves the previous file)."""
        data = {"version": VERSION, "boot_id": self.boot_id, "logs": self.logs,
                "ras": {address: dict(counts) for address, counts in list(self.ras.items()) if counts}}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=f".{self.path.name}.")
        try:
            with os.fdopen(fd, "w") as f:
                json.dump(data, f)
            Path(tmp).replace(self.path)
        except BaseException:
            with contextlib.suppress(OSError):
                Path(tmp).unlink()
            raise
