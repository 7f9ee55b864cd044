"""Where error events come from: the kernel log, NVML's XID events, amdgpu's RAS counters.

* `KernelLog` reads ``/dev/kmsg`` (one record per read, non-blocking) or a text file that
  grows (a forwarded log, a test's file), from where it stood; a rotated or truncated file
  is read again from its start.
* `NvmlXidEvents` waits on an NVML event set for critical XID events, never blocking.
* `RasCounters` reads ``ras/<block>_err_count`` files (``ue: N`` / ``ce: N`` / ``de: N``) and turns
  their increases into events with counts.

`ErrorRouter` classifies events with their catalogue and puts each in the channel of the
device at its bus address; an event for an address no monitor has is kept apart
(`unrouted`), never dropped.
"""

from __future__ import annotations

import ctypes
import errno
import logging
import os
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from fleet.asicmon.errors.catalogue import classify
from fleet.asicmon.errors.events import ErrorEvent, EventChannel
from fleet.asicmon.errors.kernel_log import normalise_address

__all__ = ["KMSG", "RAS_BLOCKS", "ErrorRouter", "KernelLog", "NvmlXidEvents", "RasCounters", "boot_time", "handle_key"]

log = logging.getLogger(__name__)

RAS_BLOCKS = ("umc", "gfx", "sdma", "mmhub", "xgmi_wafl", "pcie_bif", "hdp", "athub", "mp0", "mp1", "smn", "df", "sem",
              "fuse", "mca", "vcn", "jpeg", "ih", "mpio")
KMSG = "/dev/kmsg"


def boot_time() -> float | None:
    """When this machine booted (epoch seconds), from /proc/stat; None where unknown."""
    try:
        with Path("/proc/stat").open() as f:
            for line in f:
                if line.startswith("btime "):
                    return float(line.split()[1])
    except OSError:
        pass
    return None


class KernelLog:
    """New lines of ``/dev/kmsg`` or of a growing text file, a chunk at a time.

    Where it stands can be handed to a new reader (`position`, ``resume``): the sequence
    number of the last kmsg record read, or the offset in the file of the first byte not yet
    handed out. A reader resumed there reads what follows, nothing twice (kmsg records still
    in the kernel's ring buffer are read again from its start and skipped up to it)."""

    CHUNK_BYTES = 1 << 20  # a file is read this much at a time: a flood never sits whole in memory

    def __init__(self, path: str = KMSG, *, from_start: bool = False, resume: int | None = None,
                 kmsg: bool | None = None) -> None:
        """``kmsg``: the path holds /dev/kmsg's records (default: it is /dev/kmsg), e.g. a copy."""
        self.path = path
        self.is_kmsg = path == KMSG if kmsg is None else kmsg
        self.lost = 0  # kmsg records overwritten before they were read (gaps in the sequence)
        self._fd: int | None = None
        self._file = None
        self._offset = 0  # file: bytes read so far; kmsg: sequence number of the last record read
        self._from_start = from_start or (resume is not None and resume >= 0)  # -1: kmsg, nothing read yet
        self._resume = resume
        self._partial = b""

    @property
    def position(self) -> int:
        """kmsg: the last record's sequence number (-1: none yet); a file: the offset of the
        first byte not handed out."""
        return self._offset - len(self._partial) if not self.is_kmsg else self._offset

    def read(self, max_lines: int = 10_000) -> list[str]:
        return self._read_kmsg(max_lines) if self.is_kmsg else self._read_file()

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        if self._file is not None:
            self._file.close()
            self._file = None

    def _read_kmsg(self, max_lines: int) -> list[str]:
        if self._fd is None:
            self._fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK)
            self._offset = -1 if self._resume is None else max(-1, self._resume)
            if not self._from_start:
                os.lseek(self._fd, 0, os.SEEK_END)
        lines: list[str] = []
        while len(lines) < max_lines:
            try:
                chunk = os.read(self._fd, 8192)
            except BlockingIOError:
                break
            except OSError as exc:
                if exc.errno == errno.EPIPE:  # the ring buffer overwrote records we had not read:
                    continue  # the reader moves on to the oldest one; the gap is counted below
                raise
            if not chunk:
                break
            # /dev/kmsg gives one record per read; a copy of it in a file, several (the last
            # one maybe cut short). A record's first line is the message; lines after it
            # (" SUBSYSTEM=pci", " DEVICE=…") are its dictionary. Its header is
            # "priority,sequence,microseconds,flags;".
            data = self._partial + chunk
            cut = data.rfind(b"\n") + 1
            self._partial = data[cut:]
            for line in data[:cut].split(b"\n"):
                if line and not line.startswith(b" "):
                    self._record(line, lines)
        return lines

    def _record(self, line: bytes, lines: list[str]) -> None:
        seq = line.split(b",", 2)[1] if line.count(b",", 0, 40) >= 2 else b""
        if seq.isdigit():
            number = int(seq)
            if number <= self._offset:
                return  # read before a restart
            if self._offset >= 0 and number > self._offset + 1:
                self.lost += number - self._offset - 1  # overwritten before we read them
            self._offset = number
        lines.append(line.decode("utf-8", "replace"))

    def _read_file(self) -> list[str]:
        try:
            size = Path(self.path).stat().st_size
        except FileNotFoundError:
            return []
        if self._file is None:
            self._file = Path(self.path).open("rb")  # noqa: SIM115
            self._offset = (self._resume or 0) if self._from_start else size
            self._resume, self._from_start, self._partial = None, True, b""  # a rotated file: from its start
            if self._offset > size:  # rotated while nobody read it
                self._offset = 0
        if size < self._offset:  # truncated or rotated
            self.close()
            return self._read_file()
        self._file.seek(self._offset)
        data = self._partial + self._file.read(min(size - self._offset, self.CHUNK_BYTES))
        self._offset += len(data) - len(self._partial)
        cut = data.rfind(b"\n") + 1
        if not cut and len(data) >= self.CHUNK_BYTES:  # a line longer than a chunk: handed out as it is
            cut = len(data) + 1
            data += b"\n"
        self._partial = data[cut:]  # a line still being written
        if not cut:
            return []
        return data[:cut - 1].decode("utf-8", "replace").split("\n")


class NvmlXidEvents:
    """Critical XID events of NVML's event API (nvidia-ml-py), read without waiting.

    An event names its device by an NVML handle. In nvidia-ml-py a handle is a ctypes
    pointer, and ``data.device`` builds a new pointer object on every access, so events are
    matched to devices by the pointer's value (the handle NVML gave), and where that fails by
    the bus id NVML reports for the event's device."""

    XID_CRITICAL = 0x8  # nvmlEventTypeXidCriticalError

    def __init__(self, lib: Any, handles: dict[str, Any]) -> None:
        """``handles``: NVML device handle by the device's bus address."""
        self.lib = lib
        self.by_handle = {handle_key(h): normalise_address(address) for address, h in handles.items()}
        self.addresses = set(self.by_handle.values())
        self._set = lib.nvmlEventSetCreate()
        for handle in handles.values():
            lib.nvmlDeviceRegisterEvents(handle, self.XID_CRITICAL, self._set)

    def read(self, limit: int = 1000) -> list[ErrorEvent]:
        events: list[ErrorEvent] = []
        while len(events) < limit:
            try:
                data = self.lib.nvmlEventSetWait_v2(self._set, 0)
            except self.lib.NVMLError as exc:
                if getattr(exc, "value", None) != getattr(self.lib, "NVML_ERROR_TIMEOUT", 10):
                    log.warning("NVML event wait failed: %s", exc)
                break
            address = self.address_of(data.device)
            when = getattr(data, "timeStamp", 0) / 1e6 or time.time()
            code = str(int(data.eventData))
            events.append(ErrorEvent("nvidia", code, "NVML critical XID event", when, source="nvml",
                                     raw=f"nvml xid {code} on {address or 'an unknown device'}", address=address))
        return events

    def address_of(self, device: Any) -> str:
        """The bus address of an event's device: by the handle's value, else by the bus id
        NVML gives for it; "" where neither is one of ours."""
        address = self.by_handle.get(handle_key(device))
        if address is not None:
            return address
        try:
            bus = self.lib.nvmlDeviceGetPciInfo(device).busId
        except Exception:  # noqa: BLE001 - an old driver, a fake: the event stays unrouted
            return ""
        address = normalise_address(bus.decode() if isinstance(bus, bytes) else str(bus))
        return address if address in self.addresses else ""


def handle_key(handle: Any) -> int:
    """What identifies an NVML handle: the address a ctypes pointer holds (equal for every
    pointer object to the same device), or the object itself for anything else."""
    try:
        return ctypes.cast(handle, ctypes.c_void_p).value or 0
    except (ctypes.ArgumentError, TypeError):
        return id(handle)


class RasCounters:
    """amdgpu's per-block RAS error counts of one device, as events when they increase."""

    def __init__(self, files: Any, address: str, blocks: Iterable[str] = RAS_BLOCKS, prefix: str = "ras/",
                 baseline: dict[str, int] | None = None) -> None:
        """``baseline``: the last readings (``"umc.ue": 3``) to count from, e.g. kept across the
        agent's restarts (`fleet.asicmon.errors.state`); updated in place. Without one the first
        reading is where counting starts."""
        self.files, self.address, self.prefix = files, normalise_address(address), prefix
        self.blocks = tuple(blocks)
        self._last: dict[str, int] = {} if baseline is None else baseline

    def read(self, now: float | None = None) -> list[ErrorEvent]:
        now = time.time() if now is None else now
        events = []
        for block in self.blocks:
            try:
                text = self.files.read_text(f"{self.prefix}{block}_err_count")
            except (OSError, KeyError):
                continue
            for kind, value in _ras_counts(text).items():
                slot = f"{block}.{kind}"
                before, self._last[slot] = self._last.get(slot), value
                if before is not None and value > before:
                    events.append(ErrorEvent(
                        "amd", slot, f"{value - before} {kind} errors in {block} block (total {value})", now,
                        source="ras_sysfs", address=self.address, count=value - before,
                        raw=f"{self.prefix}{block}_err_count: {text.strip()!r}",
                    ))
        return events


def _ras_counts(text: str) -> dict[str, int]:
    out = {}
    for line in text.splitlines():
        name, _, value = line.partition(":")
        if name.strip() in ("ue", "ce", "de") and value.strip().isdigit():
            out[name.strip()] = int(value)
    return out


class ErrorRouter:
    """Classifies events and puts each in its device's channel, by bus address."""

    def __init__(self, catalogue_of: Callable[[str], str | None] | None = None) -> None:
        self.channels: dict[str, tuple[EventChannel, str, str | None]] = {}  # address -> (channel, serial, catalogue)
        self.unrouted = EventChannel()
        self.catalogue_of = catalogue_of

    def add(self, address: str, channel: EventChannel, serial: str, catalogue: str | None = None) -> None:
        self.channels[normalise_address(address)] = (channel, serial, catalogue)

    def route(self, events: Iterable[ErrorEvent]) -> None:
        for event in events:
            target = self.channels.get(event.address)
            if target is None:
                classify(event)
                self.unrouted.put(event)
                continue
            channel, serial, name = target
            event.serial = serial
            classify(event, name)
            channel.put(event)
