"""``events CATALOGUE from SOURCE, ...`` and ``diagnose "COMMAND"``: a device type's error events.

    events nvidia_xid from kmsg, nvml     # Xid lines of the kernel log and NVML's XID events
    events amd_ras from ras_sysfs, kmsg   # amdgpu's RAS counters and its kernel-log lines
    diagnose "dcgmi diag -r 1"            # the check a repaired device must pass

The catalogue is one of `fleet.asicmon.errors.catalogue_names` (a file of
``fleet/asicmon/catalogues``); the sources are those `SOURCES` names. The compiled monitor
carries them as ``EVENTS`` and ``DIAGNOSTIC``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fleet.asicmon.errors.catalogue import catalogue_names
from fleet.asimov.checking.checks import suggest
from fleet.asimov.language.nodes import Diagnose, Events

if TYPE_CHECKING:
    from fleet.asimov.checking.checker import Checker

__all__ = ["SOURCES", "diagnose_stmt", "events_stmt"]

SOURCES = ("kmsg", "nvml", "ras_sysfs", "emulator")


def events_stmt(c: Checker, stmt: Events, index: int) -> None:
    if c.events is not None:
        raise c.error(stmt, "events are declared twice", "one events statement per spec")
    name = stmt.catalogue.text
    known = catalogue_names()
    if name not in known:
        raise c.error(stmt.catalogue, f"unknown error catalogue {name!r}", suggest(name, known, "an error catalogue"))
    sources: list[str] = []
    for source in stmt.sources:
        if source.text not in SOURCES:
            raise c.error(source, f"unknown event source {source.text!r}", suggest(source.text, SOURCES, "an event source"))
        if source.text in sources:
            raise c.error(source, f"event source {source.text} is named twice", "each source once")
        sources.append(source.text)
    c.events = {"catalogue": name, "sources": tuple(sources)}


def diagnose_stmt(c: Checker, stmt: Diagnose, index: int) -> None:
    if c.diagnostic:
        raise c.error(stmt, "diagnose is declared twice", "one diagnose statement per spec")
    command = stmt.command.value.strip()
    if not command:
        raise c.error(stmt.command, "a diagnose command cannot be empty", 'a command line, e.g. "dcgmi diag -r 1"')
    c.diagnostic = command
