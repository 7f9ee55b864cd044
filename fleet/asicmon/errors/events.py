"""Error events: what a driver reports going wrong, beside the counters a monitor reads.

An `ErrorEvent` is one kind of error on one device within one time bucket: the vendor's
code, what the catalogue says of it, the line or record it came from, how many times it
came and when first and last. An `EventChannel` is where a device's sources put what they
read and where the poll takes it from (`drain`): identical events of a bucket are merged as
they arrive, so a flood of a million identical kernel-log lines costs one dict entry.

Identical means the same vendor, code, device address and *shape* of detail: numbers in the
detail (a pid, a link number, an address) are masked (`fingerprint`), so the 800,000 lines
of an XID 95 flood that differ only in their pid are one event per bucket.
"""

from __future__ import annotations

import re
import threading
from dataclasses import asdict, dataclass, field

__all__ = ["DEFAULT_BUCKET_S", "ErrorEvent", "EventChannel", "fingerprint"]

DEFAULT_BUCKET_S = 300.0
MAX_OPEN = 10_000  # distinct events a channel holds between two drains; more are counted, not kept

_NUMBERS = re.compile(r"0x[0-9a-fA-F]+|\d+")


def fingerprint(vendor: str, code: str, address: str, detail: str) -> str:
    """What identical events share: the detail with its numbers masked."""
    return f"{vendor}|{code}|{address}|{_NUMBERS.sub('#', detail)}"


@dataclass
class ErrorEvent:
    """One kind of driver error on one device in one bucket (``count`` times)."""

    vendor: str  # "nvidia", "amd", ...
    code: str  # the vendor's code as text: "79", "12028" (an SXid), "umc.ue"
    detail: str  # the driver's words (pid and process name taken out)
    time: float  # epoch seconds of the first occurrence
    raw: str = ""  # the first line or record exactly as read
    source: str = ""  # "kmsg", "nvml", "ras_sysfs", "emulator"
    address: str = ""  # the device's bus address as the driver wrote it (lower case)
    count: int = 1
    first_seen: float = 0.0
    last_seen: float = 0.0
    pid: int | None = None
    process: str = ""
    # what the catalogue says (fleet.asicmon.errors.catalogue.classify fills these)
    name: str = ""
    meaning: str = ""
    severity: str = ""
    action: str = ""
    cause: str = ""
    hardware: bool = False  # a fault of the device itself (counts toward repeat offenders)
    known: bool = True
    serial: str = ""  # the device it was routed to, once routed
    key: str = field(default="", repr=False)

    def __post_init__(self) -> None:
        if not self.first_seen:
            self.first_seen = self.time
        if not self.last_seen:
            self.last_seen = self.time
        if not self.key:
            self.key = fingerprint(self.vendor, self.code, self.address, self.detail)

    def bucket(self, bucket_s: float) -> int:
        return int(self.first_seen // bucket_s)

    def as_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> ErrorEvent:
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})


class EventChannel:
    """A device's error events between two polls, merged per fingerprint and bucket.

    Thread-safe: a reader thread may `put` while the poll `drain`s."""

    def __init__(self, bucket_s: float = DEFAULT_BUCKET_S, max_open: int = MAX_OPEN) -> None:
        self.bucket_s = bucket_s
        self.max_open = max_open
        self._open: dict[tuple[str, int], ErrorEvent] = {}
        self._lock = threading.Lock()
        self.received = 0  # occurrences put, all time
        self.overflowed = 0  # occurrences not kept because the channel was full

    def put(self, event: ErrorEvent) -> None:
        slot = (event.key, int(event.first_seen // self.bucket_s))
        with self._lock:
            self.received += event.count
            held = self._open.get(slot)
            if held is not None:
                _merge(held, event)
            elif len(self._open) < self.max_open:
                self._open[slot] = event
            else:
                self.overflowed += event.count

    def put_many(self, events) -> None:
        for event in events:
            self.put(event)

    def drain(self) -> list[ErrorEvent]:
        """The events merged since the last drain, oldest first; the channel is empty after."""
        with self._lock:
            events, self._open = list(self._open.values()), {}
        events.sort(key=lambda e: e.first_seen)
        return events

    def __len__(self) -> int:
        return len(self._open)


def _merge(held: ErrorEvent, new: ErrorEvent) -> None:
    held.count += new.count
    if new.first_seen < held.first_seen:
        held.first_seen, held.time, held.raw = new.first_seen, new.time, new.raw
    if new.last_seen > held.last_seen:
        held.last_seen = new.last_seen
