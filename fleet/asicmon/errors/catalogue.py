"""Error catalogues: what a vendor's error code means and what to do about it, kept as data.

One versioned JSON file per vendor in ``fleet/asicmon/catalogues/`` (``nvidia_xid.json``:
NVIDIA's whole Xid catalogue, 1-172, and the NVSwitch SXids of the Fabric Manager guide;
``amd_ras.json``: amdgpu's RAS blocks and kernel-log events): code -> name, meaning, severity,
the vendor's published immediate action and ours, cause, and whether it is a hardware fault.
A spec names the catalogue its device type's events are classified by (``events nvidia_xid
from kmsg, nvml``).

A code the catalogue does not know is *unknown: inspect*: kept and shown with its raw line,
counted on /metrics, and given to a person (action ``inspect``), never ignored and never
guessed into a rung. An entry with ``recovery_actions`` (Xid 154) takes the action its line
announces ("... changed from 0x0 (None) to 0x1 (GPU Reset Required)").
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from fleet.asicmon.errors.events import ErrorEvent

__all__ = [
    "ACTIONS",
    "CATALOGUE_DIR",
    "SEVERITIES",
    "UNKNOWN",
    "Catalogue",
    "CatalogueEntry",
    "catalogue",
    "catalogue_names",
    "classify",
]

CATALOGUE_DIR = Path(__file__).resolve().parents[1] / "catalogues"
# The immediate actions: nothing, a person looks (no rung is taken: an unknown code, or a
# vendor's "contact support"), then the repair ladder's rungs from the least disruptive.
ACTIONS = ("ignore", "inspect", "restart_application", "reset_device", "reboot_host", "inspect_hardware")
UNKNOWN = "unknown: inspect"
# Xid 154's line: "GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)"
_RECOVERY = re.compile(r"\bto (0x[0-9a-fA-F]+|\d+)(?: \(([^)]*)\))?")
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
    published: str = ""  # the vendor's own immediate action (NVIDIA's RESTART_APP, RESET_GPU, ...)
    in_use: bool = True  # False: the vendor lists the code as not raised by current drivers
    recovery_actions: dict = field(default_factory=dict, compare=False)  # Xid 154: announced value -> action


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
            for value, announced in row.get("recovery_actions", {}).items():
                if announced["action"] not in ACTIONS:
                    raise ValueError(f"{name}: code {code} announces {value} with an unknown action")
            self.entries[code] = CatalogueEntry(
                code, row["name"], row["meaning"], row["severity"], row["action"], row["cause"], bool(row.get("hardware")),
                published=row.get("published_action", ""), in_use=row.get("in_use", True),
                recovery_actions=row.get("recovery_actions", {}))

    def lookup(self, code: str) -> CatalogueEntry:
        entry = self.entries.get(code)
        if entry is None and "." in code:  # AMD blocks: "*.ue" stands for any block's
            entry = self.entries.get("*." + code.rsplit(".", 1)[1])
        if entry is None:
            return CatalogueEntry(code, f"{UNKNOWN}: {self.vendor} {code}",
                                  f"Code {code} is not in catalogue {self.name} {self.version}: a person should read "
                                  "the raw line; no rung is taken for it.", "warning", "inspect", "unknown", known=False)
        return entry

    def classify(self, event: ErrorEvent) -> ErrorEvent:
        """Fills the event's catalogue fields (in place) and returns it."""
        entry = self.lookup(event.code)
        event.name, event.meaning, event.severity = entry.name, entry.meaning, entry.severity
        event.action, event.cause, event.known = entry.action, entry.cause, entry.known
        event.hardware = entry.hardware
        if entry.recovery_actions:
            _announced(entry, event)
        return event


def _announced(entry: CatalogueEntry, event: ErrorEvent) -> None:
    """Xid 154: the action the line announces; "unknown: inspect" when it cannot be read."""
    m = _RECOVERY.search(event.detail) or _RECOVERY.search(event.raw)
    value = str(int(m.group(1), 0)) if m else None
    announced = entry.recovery_actions.get(value) if value is not None else None
    if announced is None:
        said = f"{m.group(1)} ({m.group(2)})" if m else "nothing we can read"
        event.name = f"{UNKNOWN}: {entry.name}"
        event.meaning = f"The driver announced recovery action {said}, which the catalogue does not know; a person should read the raw line."
        event.action, event.severity = "inspect", "warning"
        return
    event.name = f"{entry.name}: {announced['name']}"
    event.meaning = f"The driver says {announced['meaning']} (recovery action {value}: {announced['name']})."
    event.action = announced["action"]
    event.severity = "info" if event.action == "ignore" else "critical" if event.action != "restart_application" else "warning"


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
            event.name, event.known, event.action, event.severity = f"{UNKNOWN}: {event.vendor} {event.code}", False, "inspect", "warning"
            return event
    return catalogue(name).classify(event)
