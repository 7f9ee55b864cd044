"""Error catalogues: what a vendor's error code means and what to do about it, kept as data.

One versioned JSON file per vendor in ``fleet/asicmon/catalogues/`` (``nvidia_xid.json``,
``amd_ras.json``): code -> name, meaning, severity, immediate action, cause, and whether it
is a hardware fault. A spec names the catalogue its device type's events are classified by
(``events nvidia_xid from kmsg, nvml``). A code the catalogue does not know is classified as
*unknown*: kept and shown with its raw line, never dropped.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from fleet.asicmon.errors.events import ErrorEvent

__all__ = [
    "ACTIONS",
    "CATALOGUE_DIR",
    "SEVERITIES",
    "Catalogue",
    "CatalogueEntry",
    "catalogue",
    "catalogue_names",
    "classify",
]

CATALOGUE_DIR = Path(__file__).resolve().parents[1] / "catalogues"
# The immediate actions, from the least to the most disruptive (the repair ladder's rungs).
ACTIONS = ("ignore", "restart_application", "reset_device", "reboot_host", "inspect_hardware")
SEVERITIES = ("info", "warning", "critical")


@dataclass(frozen=True)
class CatalogueEntry:
    code: str
    name: str
    meaning: str
    severity: str
    action: str
    cause: str
    hardware: bool = False
    known: bool = True


class Catalogue:
    """One vendor's catalogue, loaded from its file."""

    def __init__(self, name: str, data: dict) -> None:
        self.name = name
        self.vendor = data["vendor"]
        self.version = data["version"]
        self.entries: dict[str, CatalogueEntry] = {}
        for code, row in data["codes"].items():
            if row["action"] not in ACTIONS or row["severity"] not in SEVERITIES:
                raise ValueError(f"{name}: code {code} has an unknown action or severity")
            self.entries[code] = CatalogueEntry(code, row["name"], row["meaning"], row["severity"], row["action"],
                                                row["cause"], bool(row.get("hardware")))

    def lookup(self, code: str) -> CatalogueEntry:
        entry = self.entries.get(code)
        if entry is None and "." in code:  # AMD blocks: "*.ue" stands for any block's
            entry = self.entries.get("*." + code.rsplit(".", 1)[1])
        if entry is None:
            return CatalogueEntry(code, f"unknown {self.vendor} error {code}",
                                  f"Code {code} is not in catalogue {self.name} {self.version}; see the raw line.",
                                  "warning", "ignore", "unknown", known=False)
        return entry

    def classify(self, event: ErrorEvent) -> ErrorEvent:
        """Fills the event's catalogue fields (in place) and returns it."""
        entry = self.lookup(event.code)
        event.name, event.meaning, event.severity = entry.name, entry.meaning, entry.severity
        event.action, event.cause, event.known = entry.action, entry.cause, entry.known
        event.hardware = entry.hardware
        return event


def catalogue_names() -> tuple[str, ...]:
    return tuple(sorted(p.stem for p in CATALOGUE_DIR.glob("*.json")))


@cache
def catalogue(name: str) -> Catalogue:
    path = CATALOGUE_DIR / f"{name}.json"
    if not path.is_file():
        raise LookupError(f"no error catalogue {name!r} (known: {', '.join(catalogue_names())})")
    return Catalogue(name, json.loads(path.read_text()))


def classify(event: ErrorEvent, name: str | None = None) -> ErrorEvent:
    """Classifies by catalogue ``name``, or by the vendor's catalogue (``<vendor>_*.json``)."""
    if name is None:
        name = next((n for n in catalogue_names() if n.startswith(event.vendor + "_")), "")
        if not name:
            event.name, event.known, event.action, event.severity = f"unknown {event.vendor} error", False, "ignore", "warning"
            return event
    return catalogue(name).classify(event)
