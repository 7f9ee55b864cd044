"""Fault classes mapped to what a device shows (``fault_classes.json`` beside this file),
with the first rung, cause and hardware flag of driver errors taken from the real error
catalogue (`fleet.asicmon.errors.catalogue`), not restated here."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from fleet.asicmon.errors.catalogue import catalogue
from fleet.asicmon.errors.kernel_log import parse_message
from fleet.asicmon.ladder_rules import LADDER

__all__ = ["CLASSES_FILE", "Signal", "load_classes", "signal_for", "xid_line"]

CLASSES_FILE = Path(__file__).with_name("fault_classes.json")
VISIBLE = ("xid", "metric", "hung")  # seen by the device monitor on its own


@dataclass(frozen=True)
class Signal:
    kind: str  # xid, metric, hung, diagnostic, invisible
    detail: str  # the Xid code or metric name
    start: str  # the first rung ("ignore": the catalogue asks for no action)
    cause: str
    hardware: bool
    cured_by: str | None
    node_wide: bool  # takes the whole server out (nothing on one device shows it)
    shows: str | dict | None = None  # the kernel-log line, or the polled fields, the device shows
    answers_uncured: bool = True  # whether the device answers after a rung that did not cure it

    @property
    def visible(self) -> bool:
        return self.kind in VISIBLE


def _signal(row: dict, where: str) -> Signal:
    kind, _, detail = row["signal"].partition(":")
    cured = row.get("cured_by")
    if cured is not None and cured not in LADDER[:3]:
        raise ValueError(f"{where}: cured_by {cured!r} is no repair rung")
    if kind == "xid":
        line = xid_line(detail)
        parsed = parse_message(line)  # the follower's own reading of the line
        if parsed is None or parsed[1] != detail:
            raise ValueError(f"{where}: {row['signal']!r} is no Xid the kernel-log reader reads")
        entry = catalogue("nvidia_xid").lookup(parsed[1])
        return Signal(kind, detail, entry.action, entry.cause, entry.hardware, cured, False, line,
                      bool(row.get("answers_uncured", True)))
    if kind not in VISIBLE + ("diagnostic", "invisible"):
        raise ValueError(f"{where}: unknown signal {row['signal']!r}")
    if kind in ("metric", "hung") and not isinstance(row.get("shows"), dict):
        raise ValueError(f"{where}: a {kind} signal says what a poll shows ('shows')")
    return Signal(kind, detail, row.get("start", "inspect_hardware"), row.get("cause", "unknown"),
                  bool(row.get("hardware")), cured, kind == "invisible", row.get("shows"),
                  bool(row.get("answers_uncured", kind != "hung")))


def xid_line(code: str) -> str:
    """The kernel-log line an NVIDIA driver writes for Xid ``code``."""
    return f"NVRM: Xid (PCI:0000:3b:00): {code}, pid=4242, name=python3, replayed fault"


def load_classes(path: Path = CLASSES_FILE) -> dict[str, Signal]:
    data = json.loads(Path(path).read_text())["classes"]
    if "default" not in data:
        raise ValueError(f"{path}: no 'default' class")
    return {key: _signal(row, f"{path}: {key}") for key, row in data.items()}


def signal_for(classes: dict[str, Signal], kind: str) -> Signal:
    return classes.get(kind, classes["default"])
