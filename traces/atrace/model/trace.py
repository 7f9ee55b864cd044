"""The trace model: one columnar table of events, a few small tables beside it.

A trace can hold millions of events, so there is no Python object per event: every field is
a numpy column and strings (names, categories, operator types) are interned into one
:class:`StringTable`. Arguments, which only a drill-down reads, are kept as one block of
JSON bytes with offsets (:class:`ArgStore`) and decoded on demand.

Times are integer nanoseconds. Readers convert from their source's unit (microseconds in
Chrome and Kineto JSON).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

import numpy as np
import orjson


class Kind(IntEnum):
    """What an event is. Readers map their source's categories onto these."""

    HOST_OP = 0  # framework operator on a CPU thread (aten::mm, an emulator host op)
    PYTHON = 1  # Python function frame
    ANNOTATION = 2  # user range (ProfilerStep#3, "## forward ##") on a host or device track
    RUNTIME = 3  # runtime / driver call: kernel launch, memcpy call, synchronisation
    KERNEL = 4  # operator executing on an accelerator core or stream
    MEMCPY = 5  # data transfer (DMA, host-to-device copy)
    MEMSET = 6  # device memory fill
    COMM = 7  # collective or point-to-point communication
    INSTANT = 8  # instant event (no duration)
    COUNTER = 9  # counter sample; its values are in args
    SYNC = 10  # a wait for the device recorded as such (Kineto's cuda_sync: stream / event sync)


#: Kinds that execute on an accelerator.
DEVICE_KINDS = (Kind.KERNEL, Kind.MEMCPY, Kind.MEMSET, Kind.COMM)
#: Kinds of duration events that do work (the critical path is built from these).
WORK_KINDS = (
    Kind.HOST_OP,
    Kind.PYTHON,
    Kind.RUNTIME,
    Kind.KERNEL,
    Kind.MEMCPY,
    Kind.MEMSET,
    Kind.COMM,
)
KIND_NAMES = {k: k.name.lower() for k in Kind}


class EdgeKind(IntEnum):
    """Explicit dependency edges, as the source states them."""

    DATA = 0  # data dependency of the model's graph (Chakra data_deps, emulator DAG)
    CONTROL = 1  # control dependency (Chakra ctrl_deps)
    FLOW = 2  # a flow event pair of a Chrome trace (fwdbwd, user flows)
    COLLECTIVE = 3  # the last rank's arrival at a collective -> another rank's member of it


EDGE_KIND_NAMES = {k: k.name.lower() for k in EdgeKind}

# Event flags (a bit set per event).
FLAG_SYNC = 1  # a host call that waits for the device (cudaDeviceSynchronize, ...)
FLAG_LAUNCH = 2  # a runtime call that launched device work (has a matching device event)

NO_ID = -1


class StringTable:
    """Interned strings: each distinct string is stored once and referred to by index."""

    def __init__(self, strings: list[str] | None = None):
        self.strings: list[str] = []
        self.index: dict[str, int] = {}
        for s in strings or ():
            self.intern(s)

    def intern(self, s: str) -> int:
        i = self.index.get(s)
        if i is None:
            i = len(self.strings)
            self.strings.append(s)
            self.index[s] = i
        return i

    def intern_many(self, values: list) -> np.ndarray:
        ids = list(map(self.index.get, values))
        if None in ids:
            # Each new value once, in order of first appearance (a first batch is mostly new).
            fresh = dict.fromkeys(v for v, i in zip(values, ids) if i is None)
            new = {v: self.intern(v if isinstance(v, str) else "" if v is None else str(v)) for v in fresh}
            ids = [new[v] if i is None else i for v, i in zip(values, ids)]
        return np.array(ids, dtype=np.int32)

    def lookup(self, s: str) -> int:
        """The index of ``s``, or -1 if the table does not hold it."""
        return self.index.get(s, -1)

    def __getitem__(self, i: int) -> str:
        return self.strings[i]

    def __len__(self) -> int:
        return len(self.strings)


class ArgStore:
    """Per-event argument dicts, stored as JSON bytes in one buffer with offsets."""

    def __init__(self, blob: bytes = b"", offsets: np.ndarray | None = None):
        self.blob = blob
        self.offsets = offsets if offsets is not None else np.zeros(1, dtype=np.int64)

    @classmethod
    def from_chunks(cls, chunks: list[tuple[bytes, np.ndarray]]) -> ArgStore:
        """Join per-batch (blob, lengths) pairs into one store."""
        blob = b"".join(b for b, _ in chunks)
        lengths = (
            np.concatenate([n for _, n in chunks]) if chunks else np.zeros(0, dtype=np.int64)
        )
        offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        return cls(blob, offsets)

    @classmethod
    def from_dicts(cls, dicts: list[dict | None]) -> ArgStore:
        blobs = [orjson.dumps(d) if d else b"" for d in dicts]
        lengths = np.fromiter((len(b) for b in blobs), dtype=np.int64, count=len(blobs))
        return cls.from_chunks([(b"".join(blobs), lengths)])

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def raw(self, i: int) -> bytes:
        return self.blob[self.offsets[i] : self.offsets[i + 1]]

    def get(self, i: int) -> dict[str, Any]:
        raw = self.raw(i)
        return orjson.loads(raw) if raw else {}

    def take(self, indices: np.ndarray) -> ArgStore:
        blobs = [self.raw(int(i)) for i in indices]
        lengths = np.fromiter((len(b) for b in blobs), dtype=np.int64, count=len(blobs))
        return ArgStore.from_chunks([(b"".join(blobs), lengths)])


@dataclass
class Track:
    """A timeline: a CPU thread, or an accelerator stream / core / DMA engine."""

    pid: Any
    tid: Any
    process_name: str = ""
    thread_name: str = ""
    is_device: bool = False
    device: int = -1
    stream: int = -1
    ordered: bool = True  # events on it run one after another (False: independent lanes)
    sort_index: int = 0

    @property
    def label(self) -> str:
        proc = self.process_name or f"pid {self.pid}"
        thread = self.thread_name or (f"stream {self.tid}" if self.is_device else f"tid {self.tid}")
        return f"{proc} / {thread}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "pid": self.pid,
            "tid": self.tid,
            "label": self.label,
            "is_device": self.is_device,
            "device": self.device,
            "stream": self.stream,
        }


@dataclass
class Trace:
    """A trace: events in columns, their tracks, explicit dependency edges and metadata.

    Columns (all of length ``len(trace)``): ``name``, ``cat`` and ``op`` (operator type,
    defaults to the name) are indices into ``strings``; ``kind`` is a :class:`Kind`; ``ph``
    the Chrome phase letter as a byte; ``ts`` and ``dur`` integer nanoseconds; ``track``
    an index into ``tracks``; ``corr`` the runtime correlation id (-1 if none); ``ext`` the
    framework's external id (-1 if none); ``flags`` a bit set (FLAG_SYNC, FLAG_LAUNCH).
    Edges are parallel arrays ``edge_src``, ``edge_dst`` (event indices), ``edge_kind``.
    """

    strings: StringTable
    name: np.ndarray
    cat: np.ndarray
    op: np.ndarray
    kind: np.ndarray
    ph: np.ndarray
    ts: np.ndarray
    dur: np.ndarray
    track: np.ndarray
    corr: np.ndarray
    ext: np.ndarray
    flags: np.ndarray
    args: ArgStore
    tracks: list[Track]
    edge_src: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    edge_dst: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    edge_kind: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.uint8))
    meta: dict[str, Any] = field(default_factory=dict)
    _cache: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    # -- basic facts -------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.ts)

    @property
    def end(self) -> np.ndarray:
        cached = self._cache.get("end")
        if cached is None:
            cached = self._cache["end"] = self.ts + self.dur
        return cached

    @property
    def track_is_device(self) -> np.ndarray:
        return np.array([t.is_device for t in self.tracks], dtype=bool)

    @property
    def on_device(self) -> np.ndarray:
        """Per event: whether it runs on an accelerator track."""
        cached = self._cache.get("on_device")
        if cached is None:
            if self.tracks:
                cached = self.track_is_device[self.track] if len(self) else np.zeros(0, bool)
            else:
                cached = np.zeros(len(self), dtype=bool)
            self._cache["on_device"] = cached
        return cached

    @property
    def is_slice(self) -> np.ndarray:
        """Per event: whether it is a duration event (not an instant, counter or marker)."""
        return (self.kind != Kind.INSTANT) & (self.kind != Kind.COUNTER)

    def span(self) -> tuple[int, int]:
        """(first start, last end) over all events, in ns."""
        if not len(self):
            return (0, 0)
        return int(self.ts.min()), int(self.end.max())

    def names(self, indices: np.ndarray | None = None) -> list[str]:
        col = self.name if indices is None else self.name[indices]
        s = self.strings.strings
        return [s[i] for i in col.tolist()]

    def event(self, i: int) -> dict[str, Any]:
        """One event as a plain dict (for drill-down and display)."""
        i = int(i)
        s = self.strings.strings
        return {
            "index": i,
            "name": s[self.name[i]],
            "cat": s[self.cat[i]],
            "op": s[self.op[i]],
            "kind": KIND_NAMES[Kind(int(self.kind[i]))],
            "ts_us": int(self.ts[i]) / 1000.0,
            "dur_us": int(self.dur[i]) / 1000.0,
            "track": int(self.track[i]),
            "track_label": self.tracks[int(self.track[i])].label if self.tracks else "",
            "correlation": int(self.corr[i]),
            "external_id": int(self.ext[i]),
            "args": self.args.get(i),
        }

    def kind_mask(self, *kinds: Kind) -> np.ndarray:
        """Per event: whether its kind is one of ``kinds`` (a fresh array)."""
        table = np.zeros(256, bool)
        table[[int(k) for k in kinds]] = True
        return table[self.kind]

    def context_intervals(self, track: int) -> tuple[np.ndarray, np.ndarray]:
        """Sorted disjoint (start, end) intervals of one thread's frames, ranges and
        operators: when framework or Python code runs there (cached)."""
        key = ("context", track)
        cached = self._cache.get(key)
        if cached is None:
            from .stats import merge_intervals

            context = self.kind_mask(Kind.PYTHON, Kind.ANNOTATION, Kind.HOST_OP) & self.is_slice
            ev = np.flatnonzero(context & (self.track == track))
            cached = self._cache[key] = merge_intervals(self.ts[ev], self.end[ev])
        return cached

    def find_name(self, name: str) -> int:
        return self.strings.lookup(name)

    def summary(self) -> dict[str, Any]:
        t0, t1 = self.span()
        kinds = np.bincount(self.kind, minlength=len(Kind)) if len(self) else np.zeros(len(Kind))
        return {
            "events": len(self),
            "tracks": len(self.tracks),
            "device_tracks": int(sum(t.is_device for t in self.tracks)),
            "edges": len(self.edge_src),
            "span_us": (t1 - t0) / 1000.0,
            "start_us": t0 / 1000.0,
            "kinds": {KIND_NAMES[Kind(k)]: int(kinds[k]) for k in range(len(Kind)) if kinds[k]},
            "source": self.meta.get("source", ""),
        }

    # -- derived structure ---------------------------------------------------------------
    def nesting(self) -> tuple[np.ndarray, np.ndarray]:
        """(parent, depth) per event: the enclosing slice on the same track (-1 if none)."""
        cached = self._cache.get("nesting")
        if cached is None:
            from .nesting import compute_nesting

            cached = self._cache["nesting"] = compute_nesting(self, self.is_slice)
        return cached

    def take(self, indices: np.ndarray) -> Trace:
        """A new trace with only the given events (edges between kept events survive)."""
        indices = np.asarray(indices, dtype=np.int64)
        remap = np.full(len(self), -1, dtype=np.int64)
        remap[indices] = np.arange(len(indices))
        keep = (remap[self.edge_src] >= 0) & (remap[self.edge_dst] >= 0) if len(self.edge_src) else None
        return Trace(
            strings=self.strings,
            name=self.name[indices],
            cat=self.cat[indices],
            op=self.op[indices],
            kind=self.kind[indices],
            ph=self.ph[indices],
            ts=self.ts[indices],
            dur=self.dur[indices],
            track=self.track[indices],
            corr=self.corr[indices],
            ext=self.ext[indices],
            flags=self.flags[indices],
            args=self.args.take(indices),
            tracks=self.tracks,
            edge_src=remap[self.edge_src[keep]] if keep is not None else self.edge_src,
            edge_dst=remap[self.edge_dst[keep]] if keep is not None else self.edge_dst,
            edge_kind=self.edge_kind[keep] if keep is not None else self.edge_kind,
            meta=dict(self.meta),
        )
