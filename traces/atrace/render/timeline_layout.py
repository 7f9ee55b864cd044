"""The timeline view: lanes of bars with the critical path marked, windowed on request.

A trace of a million events cannot be sent to a browser whole, and a request must not
re-read or re-analyse it. So the work is split in two:

* :func:`build_layout`, once, in the worker: every slice goes to a *row* (one per track and
  nesting depth: a host thread's stack draws as stacked rows, each accelerator stream as
  its own), rows are ordered host threads first, and the events are sorted by (row, start)
  into flat numpy columns. A running maximum of the end times per row (``reach``) makes
  "the first event of a row still open at time t" a binary search. The layout also keeps
  which events lie on the critical path, the path's cross edges (launch, sync, data
  dependencies), each event's launch partner and its arguments, and :meth:`save` /
  :func:`load_layout` store it as one ``.npy`` file per column (memory-mapped on load),
  flat in one folder under a name prefix.

* :func:`window`, per request: slice each row to the window with two binary searches, then
  merge what would be narrower than a pixel. An event at least ``g`` pixels wide is drawn
  as its own bar; runs of narrower events in a row, with gaps under ``g`` pixels between
  them, become one merged bar that says how many events it holds, their busy time, and how
  many of them lie on the critical path. ``g`` starts at one pixel and grows until the
  answer holds at most ``max_bars`` bars, so the size is bounded at any zoom.

Invariants (tested as properties): every slice overlapping the window is counted in
exactly one bar; the bars' busy times add up to the slices' time inside the window; every
critical-path event inside the window is in a bar whose ``critical`` count is positive.
Instants and counter samples are not slices and are not drawn.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from ..analysis.correlation import launch_pairs
from ..model.stats import us
from ..model.trace import KIND_NAMES, Kind, Trace

MAX_BARS = 5000
MAX_EDGES = 2000
MAX_WIDTH_PX = 20_000
_COLUMNS = ("row", "ts", "end", "reach", "event", "name", "kind", "crit", "corr", "link")
_GROWTH = 2.0  # how much the merge width grows per pass when a window has too many bars


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
    args_blob: np.ndarray  # uint8: the events' argument JSON, by original event index
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
        refers to it instead of writing them again.
        """
        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        if args_file is not None and not _holds(d / args_file, len(self.args_blob)):
            args_file = None
        arrays = {
            **self.columns,
            "row_offsets": self.row_offsets,
            "position": self.position,
            "args_offsets": self.args_offsets,
            **{f"edge_{k}": v for k, v in self.edges.items()},
        }
        if args_file is None:
            arrays["args_blob"] = self.args_blob
        for name, arr in arrays.items():
            np.save(d / f"{prefix}{name}.npy", np.ascontiguousarray(arr))
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
        return orjson.loads(raw.tobytes()) if len(raw) else {}


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


def _holds(path: Path, size: int) -> bool:
    return path.is_file() and path.stat().st_size == size


def _bytes_of(path: Path, mmap: bool) -> np.ndarray:
    """A file's bytes as a uint8 array (memory-mapped unless empty or told not to)."""
    if mmap and path.stat().st_size:
        return np.memmap(path, np.uint8, mode="r")
    return np.fromfile(path, np.uint8)


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
        "reach": _reach(row, end),
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


def _reach(row: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Running maximum of ``end`` within each row (rows are contiguous)."""
    if not len(end):
        return end.copy()
    base = int(end.min())
    stride = int(end.max()) - base + 1
    shifted = (end - base) + row.astype(np.int64) * stride
    return np.maximum.accumulate(shifted) - row.astype(np.int64) * stride + base


# -- windowing -----------------------------------------------------------------------------
@dataclass
class Bars:
    """Bars of one window, in (row, start) order; merged bars have ``count`` > 1."""

    row: np.ndarray
    start: np.ndarray  # ns, clipped to the window
    end: np.ndarray
    count: np.ndarray  # events in the bar
    busy: np.ndarray  # ns of event time inside the window
    crit: np.ndarray  # critical-path events in the bar
    event: np.ndarray  # the event of a single-event bar; for a merged one its longest event
    longest: np.ndarray  # clipped duration of that event

    def __len__(self) -> int:
        return len(self.row)


@dataclass
class Window:
    layout: TimelineLayout
    start_ns: int
    end_ns: int
    width_px: int
    bars: Bars
    merge_px: float  # bars narrower than this many pixels were merged
    edges: dict[str, np.ndarray]
    edges_total: int

    def to_dict(self) -> dict[str, Any]:
        lay, b = self.layout, self.bars
        pos = lay.position[b.event] if len(b) else np.zeros(0, np.int64)
        name_ids = np.asarray(lay.columns["name"][pos]) if len(b) else np.zeros(0, np.int32)
        used, name_idx = np.unique(name_ids, return_inverse=True)
        return {
            "start_us": us(self.start_ns),
            "end_us": us(self.end_ns),
            "width_px": self.width_px,
            "pixel_us": round((self.end_ns - self.start_ns) / self.width_px / 1000.0, 6),
            "merge_px": self.merge_px,
            "span_us": [us(lay.span_ns[0]), us(lay.span_ns[1])],
            "rows": lay.rows,
            "names": [lay.names[i] for i in used.tolist()],
            "events_in_window": int(b.count.sum()),
            "bars": {
                "row": b.row.tolist(),
                "start_us": _us_list(b.start),
                "end_us": _us_list(b.end),
                "count": b.count.tolist(),
                "busy_us": _us_list(b.busy),
                "critical": b.crit.tolist(),
                "event": np.where(b.count == 1, b.event, -1).tolist(),
                "name": name_idx.tolist(),
            },
            "merged_bars": int((b.count > 1).sum()),
            "edges": {
                "src": self.edges["src"].tolist(),
                "dst": self.edges["dst"].tolist(),
                "type": [lay.edge_types[k] for k in self.edges["type"].tolist()],
                "src_us": _us_list(self.edges["src_ns"]),
                "dst_us": _us_list(self.edges["dst_ns"]),
                "src_row": self.edges["src_row"].tolist(),
                "dst_row": self.edges["dst_row"].tolist(),
            },
            "edges_total": self.edges_total,
        }


def _us_list(ns: np.ndarray) -> list[float]:
    return (np.asarray(ns, np.float64) / 1000.0).round(3).tolist()


def check_window(start_ns: int, end_ns: int, width_px: int) -> None:
    """Raise ValueError (with what is wrong) for a window that cannot be drawn."""
    if end_ns <= start_ns:
        raise ValueError(f"end ({end_ns / 1000:g} us) must be after start ({start_ns / 1000:g} us)")
    if not 1 <= width_px <= MAX_WIDTH_PX:
        raise ValueError(f"width_px must be between 1 and {MAX_WIDTH_PX}, not {width_px}")


def window(
    layout: TimelineLayout,
    start_ns: int | None = None,
    end_ns: int | None = None,
    width_px: int = 1600,
    *,
    max_bars: int = MAX_BARS,
    max_edges: int = MAX_EDGES,
) -> Window:
    """The bars of [start_ns, end_ns) for a view ``width_px`` pixels wide (default: all)."""
    start = layout.span_ns[0] if start_ns is None else int(start_ns)
    end = max(layout.span_ns[1], start + 1) if end_ns is None else int(end_ns)
    check_window(start, end, width_px)
    items = _items_in(layout, start, end)
    pixel = (end - start) / width_px
    merge_px = 1.0
    bars = _merge(items, pixel * merge_px)
    while len(bars) > max_bars:
        merge_px *= _GROWTH
        # Past the window's width every row is one bar: the loop always ends.
        bars = _merge(bars, pixel * merge_px if merge_px <= width_px else np.inf)
    edges, total = _edges_in(layout, start, end, max_edges)
    return Window(layout, start, end, width_px, bars, merge_px, edges, total)


def _items_in(layout: TimelineLayout, start: int, end: int) -> Bars:
    """Every slice overlapping [start, end), one single-event bar each, clipped."""
    c, off = layout.columns, layout.row_offsets
    lo = np.empty(len(off) - 1, np.int64)
    hi = np.empty(len(off) - 1, np.int64)
    reach, ts = c["reach"], c["ts"]
    for r in range(len(off) - 1):
        a, b = int(off[r]), int(off[r + 1])
        lo[r] = a + np.searchsorted(reach[a:b], start, "left")
        hi[r] = a + np.searchsorted(ts[a:b], end, "left")
    idx = _ranges(lo, np.maximum(hi, lo))
    t0, t1 = np.asarray(ts[idx]), np.asarray(c["end"][idx])
    keep = (t1 > start) | ((t1 == t0) & (t0 >= start))
    idx, t0, t1 = idx[keep], t0[keep], t1[keep]
    s, e = np.maximum(t0, start), np.minimum(t1, end)
    busy = e - s
    return Bars(
        row=np.asarray(c["row"][idx]),
        start=s,
        end=e,
        count=np.ones(len(idx), np.int64),
        busy=busy,
        crit=np.asarray(c["crit"][idx]).astype(np.int64),
        event=np.asarray(c["event"][idx]),
        longest=busy,
    )


def _ranges(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Concatenation of arange(lo[k], hi[k]) for every k, without a Python loop."""
    lengths = hi - lo
    total = int(lengths.sum())
    if not total:
        return np.zeros(0, np.int64)
    nonempty = lengths > 0
    lo, lengths = lo[nonempty], lengths[nonempty]
    steps = np.ones(total, np.int64)
    firsts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    steps[firsts] = lo - np.concatenate([[0], lo[:-1] + lengths[:-1] - 1])
    return np.cumsum(steps)


def _merge(items: Bars, width_ns: float) -> Bars:
    """Merge neighbouring bars of a row narrower than ``width_ns`` with gaps under it."""
    n = len(items)
    if n == 0:
        return items
    narrow = (items.end - items.start) < width_ns
    reach = _reach(items.row, items.end)  # how far the row is covered before each bar
    new = np.ones(n, bool)
    same_row = items.row[1:] == items.row[:-1]
    close = (items.start[1:] - reach[:-1]) < width_ns
    new[1:] = ~(same_row & narrow[1:] & narrow[:-1] & close)
    first = np.flatnonzero(new)
    longest = np.maximum.reduceat(items.longest, first)
    group = np.cumsum(new) - 1
    # The longest event of each group names it.
    is_longest = items.longest == longest[group]
    _, pick = np.unique(group[is_longest], return_index=True)
    return Bars(
        row=items.row[first],
        start=items.start[first],
        end=np.maximum.reduceat(items.end, first),
        count=np.add.reduceat(items.count, first),
        busy=np.add.reduceat(items.busy, first),
        crit=np.add.reduceat(items.crit, first),
        event=items.event[np.flatnonzero(is_longest)[pick]],
        longest=longest,
    )


def _edges_in(layout: TimelineLayout, start: int, end: int, limit: int):
    """Critical-path edges touching the window (evenly thinned to ``limit``), with rows."""
    e = layout.edges
    if not len(e["src"]):
        empty = np.zeros(0, np.int64)
        return {**{k: empty for k in e}, "src_row": empty, "dst_row": empty}, 0
    inside = (np.maximum(e["src_ns"], e["dst_ns"]) >= start) & (
        np.minimum(e["src_ns"], e["dst_ns"]) < end
    )
    hits = np.flatnonzero(inside)
    total = len(hits)
    if total > limit:
        hits = hits[np.linspace(0, total - 1, limit).astype(np.int64)]
    out = {k: np.asarray(v[hits]) for k, v in e.items()}
    row = layout.columns["row"]
    out["src_row"] = np.asarray(row[layout.position[out["src"]]]).astype(np.int64)
    out["dst_row"] = np.asarray(row[layout.position[out["dst"]]]).astype(np.int64)
    return out, total
