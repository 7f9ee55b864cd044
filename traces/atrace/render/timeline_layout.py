"""The timeline layout: every slice in lanes, ready to be windowed on request.

A trace of a million events cannot be sent to a browser whole, and a request must not
re-read or re-analyse it. So :func:`build_layout` works once, in the worker: every slice
goes to a *row* (one per track and nesting depth: a host thread's stack draws as stacked
rows, each accelerator stream as its own), rows are ordered host threads first, and the
events are sorted by (row, start) into flat numpy columns. A running maximum of the end
times per row (``reach``) makes "the first event of a row still open at time t" a binary
search. The layout also keeps which events lie on the critical path, the path's cross edges
(launch, sync, data dependencies), each event's launch partner and its arguments, and
:meth:`TimelineLayout.save` / :func:`load_layout` store it as one ``.npy`` file per column
(memory-mapped on load), flat in one folder under a name prefix. A window of it is drawn by
:func:`.timeline.window`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from ..io import blocks
from ..model.links import launch_pairs
from ..model.stats import us
from ..model.trace import KIND_NAMES, Kind, Trace

_COLUMNS = ("row", "ts", "end", "reach", "event", "name", "kind", "crit", "corr", "link")


@dataclass
class TimelineLayout:
    """Slices sorted by (row, start) in columns; see the module docstring."""

    rows: list[dict[str, Any]]  # per row: track, depth, label, is_device
    names: list[str]  # string table (event names index into it)
    row_offsets: np.ndarray  # events of row r are [row_offsets[r], row_offsets[r + 1])
    columns: dict[str, np.ndarray]  # _COLUMNS, in (row, ts) order
    position: np.ndarray  # per original event index: its place in the columns, -1 if none
    edges: dict[str, np.ndarray]  # critical-path cross edges: src, dst, type, src_ns, dst_ns
    edge_types: list[str]
    args_blob: Any  # the events' argument JSON, by original event index: bytes-like, sliced [a:b]
    args_offsets: np.ndarray
    span_ns: tuple[int, int]
    meta: dict[str, Any] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.columns["ts"])

    # -- storage ---------------------------------------------------------------------------
    def save(self, directory: str | Path, prefix: str = "", *, args_file: str | None = None) -> None:
        """Write the layout as ``<prefix>layout.json`` and one ``<prefix><column>.npy`` each.

        ``args_file`` names a file in ``directory`` that already holds the argument bytes
        (the trace's args blob, e.g. written beside it for the drill-down): the layout then
        refers to it instead of writing them again. Otherwise they are written block-compressed
        (`traces.atrace.io.blocks`) as ``<prefix>args.bin``.
        """
        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        if args_file is not None and not _holds(d / args_file, len(self.args_blob)):
            args_file = None
        if args_file is None:
            args_file = f"{prefix}args.bin"
            (d / args_file).write_bytes(blocks.compress(self.args_blob[:]))
        arrays = {
            **self.columns,
            "row_offsets": self.row_offsets,
            "position": self.position,
            "args_offsets": self.args_offsets,
            **{f"edge_{k}": v for k, v in self.edges.items()},
        }
        for name, arr in arrays.items():
            np.save(d / f"{prefix}{name}.npy", np.ascontiguousarray(_narrowed(arr) if name in _NARROW else arr))
        head = {
            "rows": self.rows,
            "names": self.names,
            "edge_types": self.edge_types,
            "span_ns": list(self.span_ns),
            "meta": self.meta,
            "edge_columns": sorted(self.edges),
            "args_file": args_file,
        }
        (d / f"{prefix}layout.json").write_bytes(orjson.dumps(head))

    def event_detail(self, event: int) -> dict[str, Any]:
        """One event for a click: times, lane, critical-path mark, launch partner, args."""
        if not 0 <= event < len(self.position) or self.position[event] < 0:
            raise KeyError(f"no slice with index {event} in this trace's timeline")
        p = int(self.position[event])
        c = self.columns
        row = self.rows[int(c["row"][p])]
        link = int(c["link"][p])
        detail = {
            "index": event,
            "name": self.names[int(c["name"][p])],
            "kind": KIND_NAMES[Kind(int(c["kind"][p]))],
            "start_us": us(c["ts"][p]),
            "dur_us": us(c["end"][p] - c["ts"][p]),
            "lane": row["label"],
            "side": "device" if row["is_device"] else "host",
            "critical": bool(c["crit"][p]),
            "correlation": int(c["corr"][p]),
            "args": self._args(event),
        }
        if link >= 0 and self.position[link] >= 0:
            q = int(self.position[link])
            role = "launched_by" if row["is_device"] else "launched"
            detail[role] = {"index": link, "name": self.names[int(c["name"][q])]}
        return detail

    def _args(self, event: int) -> dict[str, Any]:
        a, b = int(self.args_offsets[event]), int(self.args_offsets[event + 1])
        raw = self.args_blob[a:b]
        return orjson.loads(bytes(raw)) if len(raw) else {}


def load_layout(directory: str | Path, prefix: str = "", *, mmap: bool = True) -> TimelineLayout:
    """Read a layout written by :meth:`TimelineLayout.save` (columns memory-mapped)."""
    d = Path(directory)
    head = json.loads((d / f"{prefix}layout.json").read_bytes())
    mode = "r" if mmap else None

    def col(name: str) -> np.ndarray:
        return np.load(d / f"{prefix}{name}.npy", mmap_mode=mode)

    return TimelineLayout(
        rows=head["rows"],
        names=head["names"],
        row_offsets=np.asarray(col("row_offsets")),
        columns={c: col(c) for c in _COLUMNS},
        position=col("position"),
        edges={k: np.asarray(col(f"edge_{k}")) for k in head["edge_columns"]},
        edge_types=head["edge_types"],
        args_blob=_bytes_of(d / head["args_file"], mmap) if head.get("args_file") else col("args_blob"),
        args_offsets=col("args_offsets"),
        span_ns=tuple(head["span_ns"]),
        meta=head["meta"],
    )


# Indices and ids stored in 32 bits where every value fits (a trace of fewer than two
# billion events; times stay 64-bit): the stored timeline is a fifth smaller.
_NARROW = ("event", "link", "position", "corr", "args_offsets")
_INT32 = np.iinfo(np.int32)


def _narrowed(arr: np.ndarray) -> np.ndarray:
    if arr.dtype.kind == "i" and arr.itemsize > 4 and (not arr.size or (arr.min() >= _INT32.min and arr.max() <= _INT32.max)):
        return arr.astype(np.int32)
    return arr


def _holds(path: Path, size: int) -> bool:
    """Whether ``path`` holds ``size`` bytes of arguments (plain, or block-compressed)."""
    return path.is_file() and len(_bytes_of(path, mmap=True)) == size


def _bytes_of(path: Path, mmap: bool):
    """A file's argument bytes, sliceable like ``bytes``: a block file's uncompressed bytes
    (`blocks.open_bytes`), or a plain file's (memory-mapped unless empty or told not to)."""
    if mmap and path.stat().st_size:
        return blocks.open_bytes(np.memmap(path, np.uint8, mode="r"))
    return blocks.open_bytes(np.fromfile(path, np.uint8))


# -- building ------------------------------------------------------------------------------
def _row_table(trace: Trace, events: np.ndarray, depth: np.ndarray):
    """Row per event and the row table: tracks in display order, then depth."""
    tracks = trace.tracks
    track_rank = np.zeros(max(len(tracks), 1), np.int64)
    order = sorted(range(len(tracks)), key=lambda i: (tracks[i].is_device, tracks[i].sort_index, i))
    track_rank[order] = np.arange(len(order))
    d = depth[events]
    key = track_rank[trace.track[events]] * (int(d.max(initial=0)) + 1) + d
    uniq, row = np.unique(key, return_inverse=True)
    rows = []
    for k in uniq.tolist():
        rank, dep = divmod(k, int(d.max(initial=0)) + 1)
        t = order[rank]
        label = tracks[t].label + (f" · depth {dep}" if dep else "")
        rows.append({"track": t, "depth": dep, "label": label, "is_device": tracks[t].is_device})
    return row.astype(np.int32), rows


def _critical_mask(n: int, path) -> np.ndarray:
    crit = np.zeros(n, np.uint8)
    if path is not None and len(path.events):
        crit[np.asarray(path.events, np.int64)] = 1
    return crit


def _path_edges(trace: Trace, path) -> tuple[dict[str, np.ndarray], list[str]]:
    """The critical path's cross edges (launch, sync, dependencies), with their times."""
    types = ["launch", "sync", "data", "control", "flow"]
    hops = [(a, b, v) for a, b, v in (path.edges if path is not None else []) if v in types]
    src = np.array([h[0] for h in hops], np.int64)
    dst = np.array([h[1] for h in hops], np.int64)
    kind = np.array([types.index(h[2]) for h in hops], np.uint8)
    # An edge leaves its source where the source ended, or where it was when the target
    # began (a launch call still running when its kernel starts).
    src_ns = np.minimum(trace.end[src], np.maximum(trace.ts[dst], trace.ts[src])) if len(src) else src
    dst_ns = trace.ts[dst] if len(dst) else dst
    return {"src": src, "dst": dst, "type": kind, "src_ns": src_ns, "dst_ns": dst_ns}, types


def _links(trace: Trace) -> np.ndarray:
    """Per event: its launch partner (the runtime call for device work and back), else -1."""
    link = np.full(len(trace), -1, np.int64)
    rt, dev = launch_pairs(trace)
    link[dev] = rt
    link[rt] = dev
    return link


def build_layout(trace: Trace, path=None) -> TimelineLayout:
    """The timeline layout of a trace; ``path`` is its :class:`CriticalPath`, if computed."""
    _, depth = trace.nesting()
    events = np.flatnonzero(trace.is_slice)
    row, rows = _row_table(trace, events, depth)
    order = np.lexsort((-trace.dur[events], trace.ts[events], row))
    events, row = events[order], row[order]
    n_rows = len(rows)
    offsets = np.searchsorted(row, np.arange(n_rows + 1)).astype(np.int64)
    ts, end = trace.ts[events], trace.end[events]
    columns = {
        "row": row,
        "ts": ts,
        "end": end,
        "reach": row_reach(row, end),
        "event": events.astype(np.int64),
        "name": trace.name[events].astype(np.int32),
        "kind": trace.kind[events].astype(np.uint8),
        "crit": _critical_mask(len(trace), path)[events],
        "corr": trace.corr[events].astype(np.int64),
        "link": _links(trace)[events],
    }
    position = np.full(len(trace), -1, np.int64)
    position[events] = np.arange(len(events))
    edges, edge_types = _path_edges(trace, path)
    return TimelineLayout(
        rows=rows,
        names=list(trace.strings.strings),
        row_offsets=offsets,
        columns=columns,
        position=position,
        edges=edges,
        edge_types=edge_types,
        args_blob=np.frombuffer(trace.args.blob, np.uint8),
        args_offsets=trace.args.offsets,
        span_ns=trace.span(),
        meta={"events": len(trace), "slices": len(events)},
    )


def row_reach(row: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Running maximum of ``end`` within each row (rows are contiguous)."""
    if not len(end):
        return end.copy()
    base = int(end.min())
    stride = int(end.max()) - base + 1
    shifted = (end - base) + row.astype(np.int64) * stride
    return np.maximum.accumulate(shifted) - row.astype(np.int64) * stride + base
