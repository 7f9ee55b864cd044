"""The timeline: windows of the timeline layout, with the critical path marked.

:func:`window`, per request: slice each row of a :class:`~.timeline_layout.TimelineLayout` to
the window with two binary searches, then merge what would be narrower than a pixel. An event
at least ``g`` pixels wide is drawn as its own bar; runs of narrower events in a row, with
gaps under ``g`` pixels between them, become one merged bar that says how many events it
holds, their busy time, and how many of them lie on the critical path. ``g`` starts at one
pixel and grows until the answer holds at most ``max_bars`` bars (when the caller bounds it:
the trace page does), so the size is bounded at any zoom. :func:`timeline` does the same for
a loaded trace, laying it out first.

Invariants (tested as properties): every slice overlapping the window is counted in
exactly one bar; the bars' busy times add up to the slices' time inside the window; every
critical-path event inside the window is in a bar whose ``critical`` count is positive.
Instants and counter samples are not slices and are not drawn.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..model.stats import us
from ..model.trace import Trace
from .timeline_layout import TimelineLayout, build_layout, row_reach

_GROWTH = 2.0  # how much the merge width grows per pass when a window has too many bars


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
class Timeline:
    """One window of the timeline: its bars and the critical path's edges in it."""

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
    if width_px < 1:
        raise ValueError(f"width_px must be at least 1, not {width_px}")


def window(
    layout: TimelineLayout,
    start_ns: int | None = None,
    end_ns: int | None = None,
    width_px: int = 1600,
    *,
    max_bars: int | None = None,
    max_edges: int | None = None,
) -> Timeline:
    """The bars of [start_ns, end_ns) for a view ``width_px`` pixels wide (default: all):
    at most ``max_bars`` bars and ``max_edges`` critical-path edges when given (a page's
    limits; without them every row merges at one pixel and every edge is kept)."""
    start = layout.span_ns[0] if start_ns is None else int(start_ns)
    end = max(layout.span_ns[1], start + 1) if end_ns is None else int(end_ns)
    check_window(start, end, width_px)
    items = _items_in(layout, start, end)
    pixel = (end - start) / width_px
    merge_px = 1.0
    bars = _merge(items, pixel * merge_px)
    while max_bars is not None and len(bars) > max_bars:
        merge_px *= _GROWTH
        # Past the window's width every row is one bar: the loop always ends.
        bars = _merge(bars, pixel * merge_px if merge_px <= width_px else np.inf)
    edges, total = _edges_in(layout, start, end, max_edges)
    return Timeline(layout, start, end, width_px, bars, merge_px, edges, total)


def timeline(
    trace: Trace,
    *,
    start_ns: int | None = None,
    end_ns: int | None = None,
    width_px: int = 1600,
    max_bars: int | None = None,
    max_edges: int | None = None,
    path=None,
) -> Timeline:
    """A window of a loaded trace's timeline (see :func:`window`); ``path`` is its
    :class:`~traces.atrace.analysis.paths.critical_path.CriticalPath`, to mark, if computed."""
    layout = build_layout(trace, path)
    return window(layout, start_ns, end_ns, width_px, max_bars=max_bars, max_edges=max_edges)


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
    reach = row_reach(items.row, items.end)  # how far the row is covered before each bar
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


def _edges_in(layout: TimelineLayout, start: int, end: int, limit: int | None):
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
    if limit is not None and total > limit:
        hits = hits[np.linspace(0, total - 1, limit).astype(np.int64)]
    out = {k: np.asarray(v[hits]) for k, v in e.items()}
    row = layout.columns["row"]
    out["src_row"] = np.asarray(row[layout.position[out["src"]]]).astype(np.int64)
    out["dst_row"] = np.asarray(row[layout.position[out["dst"]]]).astype(np.int64)
    return out, total
