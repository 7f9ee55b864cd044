"""Every view of the trace page, computed once (in the worker) and stored beside the trace.

:func:`compute_views` runs the analyses the trace page and the comparison need and
:meth:`TraceViews.save` writes them into one directory: small JSON documents (flame,
critical-path tables with the steps, correlation, the operator table a comparison reads,
the per-operator means the versions view reads) and the timeline layout's columns. A
request then reads one JSON file or slices the memory-mapped layout; it never parses or
re-analyses the raw trace. Every file name starts with ``view.``, so the views sit flat in the
trace's own folder and leave with it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from ..analysis.breakdown import Breakdown, operator_breakdown
from ..analysis.comparison import op_table
from ..analysis.correlation import Correlation
from ..analysis.critical_path import CriticalPath, critical_path
from ..analysis.path_tables import MAX_STEPS, path_tables, step_list
from ..analysis.versions import op_means
from ..errors import EmptyTraceError
from ..model.trace import Trace
from .correlation_view import correlation_view
from .flame import flame
from .timeline_layout import TimelineLayout, build_layout, load_layout

VIEW_NAMES = ("flame", "paths", "correlation", "op_table", "op_means")
FLAME_MAX_NODES = 5000
PREFIX = "view."  # every stored file's name starts with it: views sit flat beside the trace
TIMELINE_PREFIX = f"{PREFIX}timeline."


@dataclass
class TraceViews:
    documents: dict[str, dict[str, Any]]  # VIEW_NAMES -> JSON-ready dict
    layout: TimelineLayout
    seconds: dict[str, float] = field(default_factory=dict)  # time spent per part

    def save(self, directory: str | Path, *, args_file: str | None = None) -> list[str]:
        """Write every view into ``directory``; returns the names of the files written.
        ``args_file``: a file there already holding the trace's args blob (the timeline
        refers to it rather than writing a copy)."""
        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        for name, doc in self.documents.items():
            (d / f"{PREFIX}{name}.json").write_bytes(orjson.dumps(doc))
        self.layout.save(d, TIMELINE_PREFIX, args_file=args_file)
        return sorted(p.name for p in d.iterdir() if p.name.startswith(PREFIX))


def load_view(directory: str | Path, name: str) -> dict[str, Any]:
    """One stored view document by name (one of VIEW_NAMES)."""
    if name not in VIEW_NAMES:
        raise KeyError(f"no view named {name!r}; views: {', '.join(VIEW_NAMES)}")
    return orjson.loads((Path(directory) / view_file(name)).read_bytes())


def view_file(name: str) -> str:
    return f"{PREFIX}{name}.json"


def load_timeline(directory: str | Path) -> TimelineLayout:
    return load_layout(directory, TIMELINE_PREFIX)


def compute_views(
    trace: Trace,
    *,
    breakdown: Breakdown | None = None,
    path: CriticalPath | None = None,
    correlation: Correlation | None = None,
    max_steps: int = MAX_STEPS,
) -> TraceViews:
    """All the stored views of one trace (reusing a breakdown, path and correlation already
    computed)."""
    clock = _Clock()
    bd = breakdown if breakdown is not None else clock.time("breakdown", operator_breakdown, trace)
    if path is None:
        try:
            path = clock.time("critical_path", critical_path, trace)
        except EmptyTraceError:
            path = None
    if path is not None:
        paths = clock.time("step_paths", path_tables, trace, path, max_steps=max_steps)
    else:
        paths = _no_path(trace)
    valid = paths["valid_steps"]
    if valid:
        representative, scope = paths["step_paths"][valid[len(valid) // 2]], "one step"
    else:
        representative, scope = paths["whole"], "whole trace"
    documents = {
        "flame": clock.time("flame", lambda: flame(trace).to_dict(FLAME_MAX_NODES)),
        "paths": paths,
        "correlation": clock.time("correlation", correlation_view, trace, correlation),
        "op_table": op_table(bd, len(paths["steps"]), representative, scope),
        "op_means": op_means(bd),
    }
    layout = clock.time("timeline", build_layout, trace, path)
    return TraceViews(documents, layout, clock.seconds)


class _Clock:
    """Seconds spent in each named part (the benchmark prints them)."""

    def __init__(self):
        self.seconds: dict[str, float] = {}

    def time(self, name: str, fn, *args, **kwargs):
        t = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            self.seconds[name] = round(time.perf_counter() - t, 3)


def _no_path(trace: Trace) -> dict[str, Any]:
    return {"whole": None, "steps": step_list(trace), "step_paths": {}, "valid_steps": []}
