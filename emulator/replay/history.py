"""Fault histories: the shared trace's JSON (``fault_start``/``fault_end`` pairs, times in
days) or a plain CSV ``node,start,end,class,description`` (times in days, or ISO dates)."""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

__all__ = ["DAY", "Fault", "HistoryError", "load_history", "parse_csv", "parse_json"]

DAY = 86400.0


class HistoryError(ValueError):
    """A history that cannot be read, with where and why."""


@dataclass(frozen=True)
class Fault:
    node: str
    start_s: float  # virtual seconds from the history's start
    end_s: float  # when the history says the node came back
    kind: str  # "Class/Desc", the key into the fault classes
    level: str = ""


def _kind(cls: str, desc: str) -> str:
    return f"{cls.strip()}/{desc.strip()}"


def parse_json(data: object, where: str = "history") -> list[Fault]:
    if not isinstance(data, list):
        raise HistoryError(f"{where}: expected a list of events")
    open_: dict[tuple[str, str], list[tuple[float, str]]] = {}
    faults: list[Fault] = []
    for i, ev in enumerate(data):
        try:
            node, t, typ, ft = ev["node_id"], float(ev["event_time"]), ev["event_type"], ev["fault_type"]
            kind, level = _kind(ft["Class"], ft["Desc"]), ft.get("Level", "")
        except (KeyError, TypeError, ValueError) as exc:
            raise HistoryError(f"{where}: event {i}: missing or bad field {exc}") from None
        key = (node, kind)
        if typ == "fault_start":
            open_.setdefault(key, []).append((t, level))
        elif typ == "fault_end":
            if not open_.get(key):
                raise HistoryError(f"{where}: event {i}: fault_end of {kind} on {node} with no start")
            start, level = open_[key].pop(0)
            if t < start:
                raise HistoryError(f"{where}: event {i}: ends before it starts")
            faults.append(Fault(node, start * DAY, t * DAY, kind, level))
        else:
            raise HistoryError(f"{where}: event {i}: unknown event_type {typ!r}")
    left = [(k, v) for k, v in open_.items() if v]
    if left:
        (node, kind), _ = left[0]
        raise HistoryError(f"{where}: {sum(len(v) for _, v in left)} faults never end (first: {kind} on {node})")
    return sorted(faults, key=lambda f: (f.start_s, f.node))


def _time(raw: str, origin: list[datetime]) -> float:
    raw = raw.strip()
    try:
        return float(raw) * DAY
    except ValueError:
        when = datetime.fromisoformat(raw)
        if not origin:
            origin.append(when)
        return (when - origin[0]).total_seconds()


def parse_csv(text: str, where: str = "history") -> list[Fault]:
    rows = list(csv.reader(text.splitlines()))
    if rows and [c.strip().lower() for c in rows[0][:3]] == ["node", "start", "end"]:
        rows = [[""]] + rows[1:]  # keep line numbers
    origin: list[datetime] = []
    faults = []
    for n, row in enumerate(rows, start=1):
        if not row or not "".join(row).strip():
            continue
        if len(row) < 4:
            raise HistoryError(f"{where}:{n}: expected node,start,end,class[,description], got {len(row)} fields")
        try:
            start, end = _time(row[1], origin), _time(row[2], origin)
        except ValueError:
            raise HistoryError(f"{where}:{n}: start and end must be days or ISO dates") from None
        if end < start:
            raise HistoryError(f"{where}:{n}: ends before it starts")
        faults.append(Fault(row[0].strip(), start, end, _kind(row[3], row[4] if len(row) > 4 else "")))
    return sorted(faults, key=lambda f: (f.start_s, f.node))


def load_history(path: str | Path) -> list[Fault]:
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise HistoryError(f"{path}: {exc.strerror}") from None
    if path.suffix.lower() == ".csv":
        return parse_csv(text, str(path))
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise HistoryError(f"{path}:{exc.lineno}:{exc.colno}: {exc.msg}") from None
    return parse_json(data, str(path))
