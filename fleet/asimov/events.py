"""``events CATALOGUE from SOURCE, ...`` and ``diagnose "COMMAND"``: a device type's error events.

    events nvidia_xid from kmsg, nvml     # Xid lines of the kernel log and NVML's XID events
    events amd_ras from ras_sysfs, kmsg   # amdgpu's RAS counters and its kernel-log lines
    diagnose "dcgmi diag -r 1"            # the check a repaired device must pass

The catalogue is one of `fleet.asicmon.errors.catalogue_names` (a file of
``fleet/asicmon/catalogues``); the sources are those `SOURCES` names. The compiled monitor
carries them as ``EVENTS`` and ``DIAGNOSTIC``.

The diagnose command is split into its arguments here, as a POSIX shell would split it
(`shlex`), and kept as that tuple: it is run without a shell (so ``;``, ``|``, ``>``, ``$VAR``
and backquotes mean nothing, and a word that is only a shell operator is refused), and only
for a spec loaded from a configured spec folder (`fleet.asimov.loader.diagnostic_argv`).
"""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING

from fleet.asicmon.errors.catalogue import catalogue_names
from fleet.asimov.checking.checks import suggest
from fleet.asimov.language.nodes import Diagnose, Events

if TYPE_CHECKING:
    from fleet.asimov.checking.interface import CheckerInterface

__all__ = ["SOURCES", "diagnose_stmt", "events_stmt", "split_command"]

SOURCES = ("kmsg", "nvml", "ras_sysfs", "emulator")
_SHELL_OPERATORS = frozenset({"|", "||", "&", "&&", ";", ";;", ">", ">>", "<", "<<", "2>", "2>&1", ">&", "&>", "(", ")"})


def events_stmt(c: CheckerInterface, stmt: Events, index: int) -> None:
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


def diagnose_stmt(c: CheckerInterface, stmt: Diagnose, index: int) -> None:
    if c.diagnostic:
        raise c.error(stmt, "diagnose is declared twice", "one diagnose statement per spec")
    try:
        argv = split_command(stmt.command.value)
    except ValueError as exc:
        raise c.error(stmt.command, f"bad diagnose command: {exc}", 'a command and its arguments, e.g. "dcgmi diag -r 1"') from None
    if not argv:
        raise c.error(stmt.command, "a diagnose command cannot be empty", 'a command line, e.g. "dcgmi diag -r 1"')
    c.diagnostic = argv


def split_command(text: str) -> tuple[str, ...]:
    """The arguments of a diagnose command line; `ValueError` for one no program could be
    given (unclosed quotes, a NUL, shell operators: it runs without a shell)."""
    if "\0" in text:
        raise ValueError("it holds a NUL character")
    argv = tuple(shlex.split(text))
    for word in argv:
        if word in _SHELL_OPERATORS or word.startswith(("$(", "`")):
            raise ValueError(f"{word!r} is shell syntax, and the command runs without a shell")
    return argv
