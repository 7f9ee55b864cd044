"""What a benchmark prints: a title, the machine it ran on, lines, named figures and aligned
tables; the same as JSON under benchmarks/out/ (or any path) when asked."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, TextIO

from .machine import OUT, machine_line


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:,.3f}" if abs(value) < 100 else f"{value:,.0f}"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return "-" if value is None else str(value)


def render_table(
    columns: Sequence[str], rows: Iterable[Sequence[Any]], indent: str = "  "
) -> list[str]:
    """Aligned text lines: a head, a rule, one line a row; numbers right-aligned, text left."""
    rows = [list(r) for r in rows]
    cells = [[_cell(v) for v in r] for r in rows]
    widths = [
        max([len(c)] + [len(r[i]) for r in cells if i < len(r)]) for i, c in enumerate(columns)
    ]
    numeric = [
        all(isinstance(r[i], int | float) for r in rows if i < len(r) and r[i] is not None)
        for i in range(len(columns))
    ]

    def line(values: Sequence[str]) -> str:
        out = [v.rjust(w) if num else v.ljust(w) for v, w, num in zip(values, widths, numeric)]
        return (indent + "  ".join(out)).rstrip()

    head = line(list(columns))
    return [head, indent + "-" * (len(head) - len(indent)), *(line(r) for r in cells)]


class Report:
    """A benchmark's output. Prints as it goes (flushed: a long run shows its progress) and
    keeps everything for ``as_dict`` / ``write_json``::

        report = Report("Probe cost")              # the title, then the machine line
        report.figure("refresh median", 41.2, "us", note="target <= 50 us")
        report.table(["type", "median us"], [["gpu", 40.1], ["video", 38.0]])
        report.write_json()                          # benchmarks/out/probe-cost.json
    """

    def __init__(self, title: str, *, machine: bool = True, stream: TextIO | None = None) -> None:
        self.title = title
        self.stream = stream
        self.machine = machine_line()
        self.lines: list[str] = []
        self.figures: dict[str, dict[str, Any]] = {}
        self.tables: list[dict[str, Any]] = []
        if title:
            self.line(title)
        if machine:
            self.line(f"  ({self.machine})")

    def line(self, text: str = "") -> None:
        """Prints one line of text as it is."""
        self.lines.append(text)
        print(text, file=self.stream or sys.stdout, flush=True)

    def figure(
        self, name: str, value: Any, unit: str = "", *, note: str = "", spec: str = ""
    ) -> Any:
        """Prints ``  name: value unit  (note)`` and keeps the figure; returns the value."""
        shown = format(value, spec) if spec else _cell(value)
        self.figures[name] = {"value": value, "unit": unit, "note": note}
        self.line(f"  {name}: {shown}{' ' + unit if unit else ''}{f'  ({note})' if note else ''}")
        return value

    def table(
        self, columns: Sequence[str], rows: Iterable[Sequence[Any]], *, title: str = ""
    ) -> None:
        """Prints an aligned table (see `render_table`) under an optional title, and keeps it."""
        rows = [list(r) for r in rows]
        self.tables.append({"title": title, "columns": list(columns), "rows": rows})
        if title:
            self.line(title)
        for text in render_table(columns, rows):
            self.line(text)

    def as_dict(self) -> dict[str, Any]:
        return {
            "title": self.title,
            "machine": self.machine,
            "figures": self.figures,
            "tables": self.tables,
            "lines": self.lines,
        }

    def write_json(self, path: str | Path | None = None, extra: Any = None) -> Path:
        """Writes the report (and `extra`, when given, under "data") as JSON to `path`, by
        default benchmarks/out/<title as a slug>.json; returns the path."""
        slug = re.sub(r"[^a-z0-9]+", "-", self.title.lower()).strip("-")[:60] or "report"
        target = Path(path) if path else OUT / f"{slug}.json"
        target.parent.mkdir(parents=True, exist_ok=True)
        body = self.as_dict() if extra is None else {**self.as_dict(), "data": extra}
        target.write_text(json.dumps(body, indent=2, default=str))
        return target
