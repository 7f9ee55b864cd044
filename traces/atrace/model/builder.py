"""Building traces: from Python code (the emulator, Chakra, tests) and from reader batches.

:class:`TraceBuilder` collects events a batch at a time into growing columns and turns them
into a :class:`~traces.atrace.model.trace.Trace` at the end; :func:`finish_trace` then fills in
what is derived from the whole trace (which tracks are accelerators, which runtime calls
launched device work or waited for it).
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import numpy.ma  # noqa: F401  (np.unique imports it on first use: 15 ms inside the first load)
import orjson

from ..errors import EmptyTraceError, TraceFormatError
from .links import graph_replay_launches
from .trace import (
    DEVICE_KINDS,
    FLAG_LAUNCH,
    FLAG_SYNC,
    NO_ID,
    ArgStore,
    EdgeKind,
    Kind,
    StringTable,
    Trace,
    Track,
)

_SYNC_NAME = re.compile(r"synchroni[sz]e", re.IGNORECASE)
_DEVICE_PROCESS = re.compile(r"^(gpu|device|accelerator|npu|tpu|mtia|xpu|hpu)\b", re.IGNORECASE)

_COLUMNS = ("name", "cat", "op", "kind", "ph", "ts", "dur", "track", "corr", "ext")
ROWS_PER_CHUNK = 1024  # events (and edges) added one at a time are moved into arrays this often
_DTYPES = {
    "name": np.int32,
    "cat": np.int32,
    "op": np.int32,
    "kind": np.uint8,
    "ph": np.uint8,
    "ts": np.int64,
    "dur": np.int64,
    "track": np.int32,
    "corr": np.int64,
    "ext": np.int64,
}


class TraceBuilder:
    """Accumulates events and tracks; :meth:`build` returns the finished trace."""

    def __init__(self, source: str = ""):
        self.strings = StringTable([""])
        self.tracks: list[Track] = []
        self.track_index: dict[tuple[Any, Any], int] = {}
        # Columns grow in place (realloc: no second copy), filled up to ``_filled``.
        self.columns: dict[str, np.ndarray] = {c: np.zeros(0, _DTYPES[c]) for c in _COLUMNS}
        self._filled = 0
        # The args of all events, appended batch by batch (a bytearray grows in place, so
        # the blob is never held twice), and each batch's arg lengths.
        self.arg_blob = bytearray()
        self.arg_lengths: list[np.ndarray] = []
        self.edges: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        self.meta: dict[str, Any] = {"source": source} if source else {}
        self.count = 0
        self._rows: dict[str, list] = {c: [] for c in _COLUMNS}
        self._row_args: list[bytes] = []
        self._edge_rows: tuple[list[int], list[int], list[int]] = ([], [], [])

    # -- tracks --------------------------------------------------------------------------
    def track(self, pid: Any, tid: Any, **attrs: Any) -> int:
        """The index of track (pid, tid), created (with ``attrs``) if new."""
        key = (pid, tid)
        i = self.track_index.get(key)
        if i is None:
            i = len(self.tracks)
            self.tracks.append(Track(pid=pid, tid=tid))
            self.track_index[key] = i
        if attrs:
            t = self.tracks[i]
            for k, v in attrs.items():
                setattr(t, k, v)
        return i

    # -- one event at a time (for generated traces) --------------------------------------
    def add(
        self,
        name: str,
        ts_ns: int,
        dur_ns: int,
        track: int,
        *,
        kind: Kind = Kind.HOST_OP,
        cat: str = "",
        op: str | None = None,
        ph: str = "X",
        corr: int = NO_ID,
        ext: int = NO_ID,
        args: dict[str, Any] | None = None,
    ) -> int:
        """Add one event; returns its index."""
        rows = self._rows
        intern = self.strings.intern
        rows["name"].append(intern(name))
        rows["cat"].append(intern(cat))
        rows["op"].append(intern(op if op is not None else name))
        rows["kind"].append(int(kind))
        rows["ph"].append(ord(ph))
        rows["ts"].append(int(ts_ns))
        rows["dur"].append(int(dur_ns))
        rows["track"].append(track)
        rows["corr"].append(corr)
        rows["ext"].append(ext)
        self._row_args.append(orjson.dumps(args) if args else b"")
        self.count += 1
        if len(self._row_args) >= ROWS_PER_CHUNK:
            # Into columns now: a list of Python ints costs ten times an array, and each
            # of orjson's bytes holds a 4 KB block until it is joined into the chunk's blob.
            self._flush_rows()
        return self.count - 1

    def edge(self, src: int, dst: int, kind: EdgeKind = EdgeKind.DATA) -> None:
        src_rows, dst_rows, kind_rows = self._edge_rows
        src_rows.append(src)
        dst_rows.append(dst)
        kind_rows.append(int(kind))
        if len(src_rows) >= ROWS_PER_CHUNK:
            self._flush_edges()

    def _flush_edges(self) -> None:
        src_rows, dst_rows, kind_rows = self._edge_rows
        if src_rows:
            self.edges.append((np.array(src_rows, np.int64), np.array(dst_rows, np.int64), np.array(kind_rows, np.uint8)))
            self._edge_rows = ([], [], [])

    def add_edges(self, src: np.ndarray, dst: np.ndarray, kind: EdgeKind) -> None:
        self._flush_edges()  # edges keep the order they were added in
        src = np.asarray(src, np.int64)
        self.edges.append((src, np.asarray(dst, np.int64), np.full(len(src), kind, np.uint8)))

    def _flush_rows(self) -> None:
        if not self._row_args:
            return
        self._append({c: np.array(self._rows[c], dtype=_DTYPES[c]) for c in _COLUMNS})
        self._rows = {c: [] for c in _COLUMNS}
        self.arg_lengths.append(np.fromiter((len(b) for b in self._row_args), np.int64, len(self._row_args)))
        self.arg_blob += b"".join(self._row_args)
        self._row_args = []

    # -- a batch of columns at once (for readers) ----------------------------------------
    def add_columns(self, columns: dict[str, np.ndarray], args: tuple[bytes, np.ndarray]) -> int:
        """Append a batch given as columns; returns the index of its first event."""
        self._flush_rows()
        first = self.count
        n = len(columns["ts"])
        self._append(columns)
        self.arg_blob += args[0]
        self.arg_lengths.append(args[1])
        self.count += n
        return first

    def _append(self, columns: dict[str, np.ndarray]) -> None:
        n = len(columns["ts"])
        end = self._filled + n
        if end > len(self.columns["ts"]):
            capacity = max(end, len(self.columns["ts"]) * 3 // 2, 1024)
            for c in _COLUMNS:
                self.columns[c].resize(capacity, refcheck=False)
        for c in _COLUMNS:
            self.columns[c][self._filled : end] = columns[c]
        self._filled = end

    def build(self, *, allow_empty: bool = False, finish: bool = True) -> Trace:
        """The trace; ``finish=False`` leaves :func:`finish_trace` to the caller (a reader
        that still fixes kinds calls it once, afterwards)."""
        self._flush_rows()
        self._flush_edges()
        cols, self.columns = self.columns, {c: np.zeros(0, _DTYPES[c]) for c in _COLUMNS}
        for column in cols.values():
            column.resize(self._filled, refcheck=False)
        self._filled = 0
        if not len(cols["ts"]) and not allow_empty:
            raise EmptyTraceError("the trace holds no events")
        if self.edges:
            src = np.concatenate([e[0] for e in self.edges])
            dst = np.concatenate([e[1] for e in self.edges])
            kind = np.concatenate([e[2] for e in self.edges])
        else:
            src = dst = np.zeros(0, np.int64)
            kind = np.zeros(0, np.uint8)
        trace = Trace(
            strings=self.strings,
            flags=np.zeros(len(cols["ts"]), np.uint8),
            args=self._arg_store(),
            tracks=self.tracks,
            edge_src=src,
            edge_dst=dst,
            edge_kind=kind,
            meta=self.meta,
            **cols,
        )
        return finish_trace(trace) if finish else trace

    def _arg_store(self) -> ArgStore:
        lengths = np.concatenate(self.arg_lengths) if self.arg_lengths else np.zeros(0, np.int64)
        offsets = np.zeros(len(lengths) + 1, np.int64)
        np.cumsum(lengths, out=offsets[1:])
        blob, self.arg_blob, self.arg_lengths = self.arg_blob, bytearray(), []
        return ArgStore(blob, offsets)


def finish_trace(trace: Trace) -> Trace:
    """Validate a freshly built trace and derive track and launch facts."""
    n = len(trace)
    if n and (trace.dur < 0).any():
        bad = int(np.flatnonzero(trace.dur < 0)[0])
        raise TraceFormatError(
            f"negative duration {trace.dur[bad] / 1000:g} us for event {trace.names([bad])[0]!r}",
            f"event #{bad}",
        )
    if len(trace.edge_src):
        bad = (trace.edge_src < 0) | (trace.edge_src >= n) | (trace.edge_dst < 0) | (trace.edge_dst >= n)
        if bad.any():
            k = int(np.flatnonzero(bad)[0])
            raise TraceFormatError(
                f"dependency edge {trace.edge_src[k]} -> {trace.edge_dst[k]} names an unknown event",
                f"edge #{k}",
            )
    # Accelerator tracks: those that carry device work, or whose process says so.
    if n:
        dev_kind = np.isin(trace.kind, np.array([int(k) for k in DEVICE_KINDS], np.uint8))
        dev_tracks = set(np.flatnonzero(np.bincount(trace.track[dev_kind], minlength=len(trace.tracks))).tolist())
    else:
        dev_tracks = set()
    for i, t in enumerate(trace.tracks):
        if i in dev_tracks or _DEVICE_PROCESS.match(t.process_name or ""):
            t.is_device = True
    trace._cache.clear()
    # Synchronisation calls and launches.
    flags = np.zeros(n, np.uint8)
    runtime = np.flatnonzero(trace.kind == Kind.RUNTIME)
    if len(runtime):
        names = trace.strings.strings
        rt_names = np.flatnonzero(np.bincount(trace.name[runtime], minlength=len(names)))
        is_sync = np.zeros(len(names), bool)
        is_sync[[i for i in rt_names.tolist() if _SYNC_NAME.search(names[i])]] = True
        flags[runtime[is_sync[trace.name[runtime]]]] |= FLAG_SYNC
        has_corr = trace.corr >= 0
        dev_corr = trace.corr[has_corr & trace.on_device]
        launched = runtime[np.isin(trace.corr[runtime], dev_corr) & (trace.corr[runtime] >= 0)]
        flags[launched] |= FLAG_LAUNCH
        flags[graph_replay_launches(trace)] |= FLAG_LAUNCH
    trace.flags = flags
    return trace
