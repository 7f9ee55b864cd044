"""The trace page's data: every view of the page, computed once (in the worker) and stored
beside the trace.

:func:`compute_page_data` runs the analyses the trace page and the comparison need and
:meth:`PageData.save` writes them into one directory: small JSON documents (flame,
critical-path tables with the steps, correlation, the operator table a comparison reads,
the per-operator means the versions view reads, the advisor's findings) and the timeline
layout's columns. A
request then reads one document (:func:`load_document`) or slices the memory-mapped layout
(:func:`load_timeline`); it never parses or re-analyses the raw trace. Every file name
starts with ``view.``, so the views sit flat in the trace's own folder and leave with it.

How much of each view is stored is the page's choice, not the engine's: the caller passes
its :class:`PageLimits`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from ..analysis.advice import advise
from ..analysis.breakdown import Breakdown, operator_breakdown
from ..analysis.comparison import op_table
from ..analysis.correlation import Correlation
from ..analysis.paths.critical_path import CriticalPath, critical_path
from ..analysis.paths.tables import path_tables, step_list
from ..analysis.versions import op_means
from ..errors import EmptyTraceError
from ..model.trace import Trace
from .correlation_view import correlation_view
from .flame import flame
from .timeline_layout import TimelineLayout, build_layout, load_layout

DOCUMENTS = ("flame", "paths", "correlation", "op_table", "op_means", "findings")
PREFIX = "view."  # every stored file's name starts with it: views sit flat beside the trace
TIMELINE_PREFIX = f"{PREFIX}timeline."


@dataclass(frozen=True)
class PageLimits:
    """How much of each view the page stores (the page's presentation limits)."""

    flame_nodes: int  # nodes per flame tree (host, device)
    path_rows: int  # operator rows of each critical-path table
    least_slack: int  # events in each table's least-slack list
    steps: int  # steps whose critical path is stored (evenly spread over the trace)
    step_events: int  # events of those steps together (a bound on their cost)
    correlation_bins: int  # equal slices of the trace in the states-over-time chart
    launched_by: int  # (host operator, device operator) pairs in the correlation view


@dataclass
class PageData:
    documents: dict[str, dict[str, Any]]  # DOCUMENTS -> JSON-ready dict
    layout: TimelineLayout
    seconds: dict[str, float] = field(default_factory=dict)  # time spent per part

    def save(self, directory: str | Path, *, args_file: str | None = None) -> list[str]:
        """Write every view into ``directory``; returns the names of the files written.
        ``args_file``: a file there already holding the trace's args blob (the timeline
        refers to it rather than writing a copy)."""
        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        for name, doc in self.documents.items():
            (d / document_file(name)).write_bytes(orjson.dumps(doc))
        self.layout.save(d, TIMELINE_PREFIX, args_file=args_file)
        return sorted(p.name for p in d.iterdir() if p.name.startswith(PREFIX))


def load_document(directory: str | Path, name: str) -> dict[str, Any]:
    """One stored document by name (one of DOCUMENTS)."""
    if name not in DOCUMENTS:
        raise KeyError(f"no view named {name!r}; views: {', '.join(DOCUMENTS)}")
    return orjson.loads((Path(directory) / document_file(name)).read_bytes())


def document_file(name: str) -> str:
    return f"{PREFIX}{name}.json"


def load_timeline(directory: str | Path) -> TimelineLayout:
    return load_layout(directory, TIMELINE_PREFIX)


def compute_page_data(
    trace: Trace,
    limits: PageLimits,
    *,
    breakdown: Breakdown | None = None,
    path: CriticalPath | None = None,
    correlation: Correlation | None = None,
) -> PageData:
    """All the stored views of one trace, within ``limits`` (reusing a breakdown, path and
    correlation already computed)."""
    clock = _Clock()
    bd = breakdown if breakdown is not None else clock.time("breakdown", operator_breakdown, trace)
    if path is None:
        try:
            path = clock.time("critical_path", critical_path, trace)
        except EmptyTraceError:
            path = None
    if path is not None:
        paths = clock.time(
            "step_paths", path_tables, trace, path, max_steps=limits.steps, max_step_events=limits.step_events,
            max_rows=limits.path_rows, least_slack=limits.least_slack,
        )
    else:
        paths = _no_path(trace)
    valid = paths["valid_steps"]
    if valid:
        representative, scope = paths["step_paths"][valid[len(valid) // 2]], "one step"
    else:
        representative, scope = paths["whole"], "whole trace"
    documents = {
        "flame": clock.time("flame", lambda: flame(trace).to_dict(limits.flame_nodes)),
        "paths": paths,
        "correlation": clock.time(
            "correlation", correlation_view, trace, correlation, bins=limits.correlation_bins,
            launched_by=limits.launched_by,
        ),
        "op_table": op_table(bd, len(paths["steps"]), representative, scope),
        "op_means": op_means(bd),
        "findings": clock.time("findings", lambda: advise(trace).to_dict()),
    }
    layout = clock.time("timeline", build_layout, trace, path)
    return PageData(documents, layout, clock.seconds)


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
