"""The Asimov compiler: checks a spec against the Asicmon catalogue and emits a Python
monitor module (a `fleet.asicmon.monitor.DeviceMonitor` subclass).

It reads as parse -> check -> emit, one module each:

* `parser` -- text to a lark parse tree, with friendly syntax errors;
* `statements` (and `reads` for driver reads) -- one function per statement kind, in the
  `STATEMENTS` table; they check names, kinds and units and record the lines to emit;
* `expressions` -- one function per expression rule, in `EXPRESSIONS`; calls of built-in
  functions go to the one registry in `builtins`;
* `values` and `units` -- what is known of a value (type, unit, constant value);
* `codegen` -- the module text.

A spec has four kinds of statement:

* ``const NAME = 42`` -- a constant;
* ``error CODE means "hung"`` -- how a driver error code maps to a driver status;
* bindings -- ``name = file("path", int)`` or ``a, b = lib.fn(handle, out, out)``: driver
  reads, evaluated every refresh, or once when prefixed by ``once``;
* ``stats.counter = expression`` -- catalogue counters, from bindings and other counters.

The checks: every name is defined above its use, every counter is in the catalogue and is
assigned once, values have the counter's kind and unit, every read is used.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fleet.asimov.builtins import BUILTINS, PARSERS
from fleet.asimov.codegen import emit
from fleet.asimov.discovery import check_discovery_fits
from fleet.asimov.errors import AsimovError, SpecErrors
from fleet.asimov.expressions import compile_expr
from fleet.asimov.parser import parse
from fleet.asimov.state import Abort, Compilation
from fleet.asimov.statements import STATEMENTS
from fleet.asimov.values import Ctx, Val

__all__ = ["CompiledSpec", "check_spec", "compile_file", "compile_spec"]


@dataclass
class CompiledSpec:
    device: str
    source: str
    code: str
    counters: tuple[str, ...]
    error_status: dict[int, str]


class Compiler(Compilation):
    def __init__(self, text: str, filename: str) -> None:
        super().__init__(text, filename, reserved=frozenset(BUILTINS) | frozenset(PARSERS))

    def expr(self, node: Any, ctx: Ctx) -> Val:
        return compile_expr(self, node, ctx)

    def run(self) -> CompiledSpec:
        tree = parse(self.text, self.filename)
        for index, stmt in enumerate(tree.children):
            with contextlib.suppress(Abort):
                STATEMENTS[stmt.data](self, stmt, index)
        if not self.errors:  # unused reads and a misfit discovery: only in a spec otherwise fine
            self.check_reads_used()
            check_discovery_fits(self)
        if self.errors:
            raise SpecErrors(self.errors)
        return CompiledSpec(
            self.device, self.filename, emit(self), tuple(self.stats), dict(self.error_status)
        )

    def check_reads_used(self) -> None:
        for sym in self.scope.values():
            if sym.kind in ("binding", "once") and not sym.used and not sym.name.startswith("_"):
                self.error(
                    sym.meta,
                    f"'{sym.name}' is read from the driver but never used",
                    "a use in a stats counter or another binding (or remove the read)",
                )


def compile_spec(text: str, filename: str = "<spec>") -> CompiledSpec:
    """Compiles spec text; raises `AsimovError` (syntax) or `SpecErrors` (checks)."""
    return Compiler(text, filename).run()


def compile_file(path: str | Path) -> CompiledSpec:
    path = Path(path)
    return compile_spec(path.read_text(), str(path))


def check_spec(text: str, filename: str = "<spec>") -> list[AsimovError]:
    """All errors of a spec (empty when it is fine)."""
    try:
        compile_spec(text, filename)
    except AsimovError as exc:
        return [exc]
    except SpecErrors as exc:
        return exc.errors
    return []
