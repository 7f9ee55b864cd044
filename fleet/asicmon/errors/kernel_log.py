"""Reading the kernel log for driver errors: NVIDIA Xid and SXid lines, amdgpu RAS lines.

The formats, as the drivers write them (with or without the ``PCI:`` prefix, the pid and
the process name, by driver version):

    NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python3, GPU has fallen off the bus.
    NVRM: Xid (PCI:0000:10:1c): 63, pid=1896, Row Remapper: New row marked for remapping, reset gpu to activate.
    NVRM: Xid (0000:01:00): 3, C 00000005 SC 00000007 M 00001ffc Data ffffffff
    nvidia-nvswitch3: SXid (PCI:0000:c1:00.0): 12028, Non-fatal, Link 14 egress non-posted PRIV error (First)
    amdgpu 0000:c1:00.0: amdgpu: 2 uncorrectable hardware errors detected in umc block
    amdgpu 0000:c1:00.0: amdgpu: ring gfx_0.0.0 timeout, signaled seq=12, emitted seq=14

Each may come as a ``/dev/kmsg`` record (``6,1234,5678901234,-;message``: the time is in
microseconds since boot), a ``dmesg`` line (``[ 1234.567890] message``), a syslog or
journal line (``2026-11-27T02:00:00+00:00 host kernel: message``, or the older
``Nov 27 02:00:00 host kernel: message``). Only the kernel's own lines count: a syslog line
whose tag is not ``kernel`` (any local user can log ``alice: NVRM: Xid (…): 79``) and a
``/dev/kmsg`` record of another facility than the kernel's (written from user space) are
counted as *not the kernel's* and passed over. Lines of other drivers are passed over; a
line that names an Xid but cannot be read is *malformed*: counted, the first ones logged,
never raised.

`KernelLogReader.feed` is the hot path (a flood is hundreds of thousands of lines a
second): a line's message is parsed once and remembered, repeats only add to a count.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Iterable
from datetime import datetime

from fleet.asicmon.errors.events import DEFAULT_BUCKET_S, ErrorEvent, fingerprint

__all__ = ["KernelLogReader", "normalise_address", "parse_message"]

log = logging.getLogger(__name__)

_XID = re.compile(
    r"(S?)Xid \((?:PCI:)?([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2})(?:\.[0-7])?\): (\d+)(?:, ?(.*))?$"
)
_PID = re.compile(r"pid=('?)([^,']*)\1, (?:name=([^,]*), )?")
_AMD_RAS = re.compile(
    r"amdgpu ([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2})(?:\.[0-7])?: amdgpu: (\d+) (uncorrectable|correctable) "
    r"hardware errors detected in (\w+) block"
)
_AMD_RING = re.compile(r"amdgpu ([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2})(?:\.[0-7])?: amdgpu: ring (\S+) timeout")
_AMD_RESET = re.compile(r"amdgpu ([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2})(?:\.[0-7])?: amdgpu: GPU reset begin")
_AMD_BAD_PAGE = re.compile(
    r"amdgpu ([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2})(?:\.[0-7])?: amdgpu: (?:Saved|saved) (\d+) bad pages"
)
MALFORMED_LOGGED = 20  # malformed lines logged in full; after that, one in every 10,000

# (vendor, code, address, detail, pid, process) of a message; None: not a driver error
Parsed = tuple[str, str, str, str, "int | None", str]
_MALFORMED = ("", "", "", "", None, "")


def normalise_address(address: str) -> str:
    """``0000:3b:00`` from any of ``PCI:0000:3B:00``, ``00000000:3b:00.0``, ``0000:3b:00.0``."""
    text = address.strip().lower().removeprefix("pci:")
    domain, _, rest = text.partition(":")
    bus_dev = rest.split(".")[0]
    try:
        return f"{int(domain, 16):04x}:{bus_dev}"
    except ValueError:
        return text


def parse_message(message: str) -> Parsed | None:
    """What a kernel-log message says, or None when it is no driver error we read;
    `_MALFORMED` when it names an Xid but cannot be read."""
    at = message.find("Xid (")
    if at >= 0:
        return _parse_xid(message, at)
    if "amdgpu" in message:
        return _parse_amd(message)
    return None


def _parse_xid(message: str, at: int) -> Parsed:
    start = at - 1 if at > 0 and message[at - 1] == "S" else at
    m = _XID.match(message, start)
    if m is None:
        return _MALFORMED
    switch, address, code, detail = m.groups()
    detail = (detail or "").strip()
    pid, process = None, ""
    p = _PID.match(detail)
    if p is not None:
        pid = int(p.group(2)) if p.group(2).isdigit() else None
        process = (p.group(3) or "").strip()
        detail = detail[p.end():]
    return ("nvidia", ("S" if switch else "") + code, normalise_address(address), detail, pid, process)


def _parse_amd(message: str) -> Parsed | None:
    m = _AMD_RAS.search(message)
    if m is not None:
        address, _count, kind, block = m.groups()
        code = f"{block.lower()}.{'ue' if kind == 'uncorrectable' else 'ce'}"
        return ("amd", code, normalise_address(address), message[m.start():], None, "")
    for pattern, code in ((_AMD_RING, "ring_timeout"), (_AMD_RESET, "gpu_reset"), (_AMD_BAD_PAGE, "bad_page")):
        m = pattern.search(message)
        if m is not None:
            return ("amd", code, normalise_address(m.group(1)), message[m.start():], None, "")
    return None


def _kernel_message(rest: str) -> str | None:
    """``host kernel: message`` -> the message; None for another program's tag."""
    _host, _, tagged = rest.partition(" ")
    tag, sep, message = tagged.partition(": ")
    if not sep or tag.split("[", 1)[0] != "kernel":
        return None
    return message.rstrip("\n")


def _without_pid(message: str) -> str:
    """The message without its ``pid=…, name=…, `` part: lines of a flood that differ only
    there are parsed once."""
    at = message.find(", pid=")
    if at < 0:
        return message
    end = message.find(", ", at + 6)
    if end < 0:
        return message
    if message.startswith(" name=", end + 1):
        after = message.find(", ", end + 7)
        end = after if after >= 0 else end
    return message[:at] + message[end:]


class KernelLogReader:
    """Turns kernel-log lines into merged error events, in time buckets.

    ``boot_time`` (epoch seconds) dates ``/dev/kmsg`` records; lines without a time of their
    own are dated when they are read. `feed` merges; `take` hands over what was merged.
    """

    CACHE_MAX = 50_000

    def __init__(self, *, boot_time: float | None = None, bucket_s: float = DEFAULT_BUCKET_S,
                 clock: Callable[[], float] = time.time) -> None:
        self.boot_time = boot_time
        self.bucket_s = bucket_s
        self.clock = clock
        self.lines = 0  # lines read
        self.matched = 0  # lines that were driver errors
        self.malformed = 0  # lines that named an Xid but could not be read
        self.not_kernel = 0  # lines another program than the kernel wrote (syslog tag, kmsg facility)
        self._parsed: dict[str, Parsed | None] = {}
        self._open: dict[tuple[str, int], ErrorEvent] = {}
        self._iso: tuple[str, float] = ("", 0.0)

    def feed(self, lines: Iterable[str]) -> None:
        now = self.clock()
        parsed_cache, opened, bucket_s = self._parsed, self._open, self.bucket_s
        for line in lines:
            self.lines += 1
            message, when = self._split(line, now)
            if message is None:
                self.not_kernel += 1
                continue
            key = _without_pid(message)
            parsed = parsed_cache.get(key, False)
            if parsed is False:
                parsed = self._remember(key, message)
            if parsed is None:
                continue
            if parsed is _MALFORMED:
                self._malformed(line)
                continue
            self.matched += 1
            slot = (self._key(parsed), int(when // bucket_s))
            held = opened.get(slot)
            if held is None:
                opened[slot] = self._event(parsed, when, line.rstrip("\n"))
            else:
                held.count += 1
                if when > held.last_seen:
                    held.last_seen = when

    def take(self) -> list[ErrorEvent]:
        """The events merged since the last `take`, oldest first."""
        events, self._open = list(self._open.values()), {}
        events.sort(key=lambda e: e.first_seen)
        return events

    # -- internals ---------------------------------------------------------------------------
    def _split(self, line: str, now: float) -> tuple[str | None, float]:
        """(message, epoch seconds) of a line in any of the forms the module names; the
        message is None where the line is not the kernel's."""
        semi = line.find(";")
        if 0 < semi < 40 and line[0].isdigit() and line.count(",", 0, semi) >= 2:
            header = line[:semi].split(",")
            if not header[0].isdigit() or int(header[0]) >> 3 != 0:  # facility 0 is the kernel's
                return None, now
            message = line[semi + 1:].rstrip("\n")
            if self.boot_time is not None:
                try:
                    return message, self.boot_time + int(header[2]) / 1e6
                except ValueError:
                    pass
            return message, now
        if line[:1] == "[":
            close = line.find("] ")
            return (line[close + 2:].rstrip("\n") if close > 0 else line.rstrip("\n")), now
        if len(line) > 19 and line[4] == "-" and line[10] == "T":
            stamp, _, rest = line.partition(" ")
            return _kernel_message(rest), self._iso_time(line, now)
        if len(line) > 16 and line[3] == " " and line[6] == " " and line[9] == ":" and line[:3].isalpha():
            return _kernel_message(line[16:]), now  # "Nov 27 02:00:00 host kernel: message"
        return line.rstrip("\n"), now

    def _iso_time(self, line: str, now: float) -> float:
        stamp = line.split(" ", 1)[0]
        if stamp == self._iso[0]:
            return self._iso[1]
        try:
            value = datetime.fromisoformat(stamp).timestamp()
        except ValueError:
            return now
        self._iso = (stamp, value)
        return value

    def _remember(self, key: str, message: str) -> Parsed | None:
        if len(self._parsed) >= self.CACHE_MAX:
            self._parsed.clear()
        parsed = self._parsed[key] = parse_message(message)
        if parsed is not None and parsed is not _MALFORMED:
            self._parsed[key] = parsed = (*parsed, fingerprint(*parsed[:4]))
        return parsed

    @staticmethod
    def _key(parsed) -> str:
        return parsed[6]

    def _event(self, parsed, when: float, raw: str) -> ErrorEvent:
        vendor, code, address, detail, pid, process, key = parsed
        mine = _PID.search(raw)  # the cached parse is of another line: this one's own pid
        if mine is not None:
            pid = int(mine.group(2)) if mine.group(2).isdigit() else None
            process = (mine.group(3) or "").strip()
        return ErrorEvent(vendor, code, detail, when, raw=raw, source="kmsg", address=address,
                          pid=pid, process=process, key=key)

    def _malformed(self, line: str) -> None:
        self.malformed += 1
        if self.malformed <= MALFORMED_LOGGED or self.malformed % 10_000 == 0:
            log.warning("malformed driver error line (%d so far): %r", self.malformed, line[:300])
