"""The state of one compilation: the names in scope, the counters assigned so far, the
lines of code emitted so far, and the errors found.

Every part of the compiler (`statements`, `reads`, `expressions`, `builtins`, `codegen`)
works on a `Compilation`. ``c.expr(node, ctx)`` compiles a sub-expression; the compiler
(`fleet.asimov.compiler.Compiler`) supplies it, so that the parts need not import each
other in a circle.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from lark import Token

from fleet.asimov.errors import AsimovError
from fleet.asimov.tree import position
from fleet.asimov.values import ANY, Ctx, Symbol, Val

__all__ = ["Abort", "Compilation"]

SPECIAL_NAMES = {"index": ("num", None), "lib": ("lib", ANY), "now": ("num", None)}


class Abort(Exception):
    """Stops compiling one statement after its error was recorded."""


class Compilation:
    def __init__(self, text: str, filename: str, reserved: frozenset[str] = frozenset()) -> None:
        self.text = text
        self.filename = filename
        self.lines = text.splitlines()
        self.reserved = reserved  # names of built-in functions: no spec may redefine them
        self.errors: list[AsimovError] = []
        self.scope: dict[str, Symbol] = {}
        self.stats: dict[str, tuple[Symbol, Any]] = {}  # counter -> (symbol, its name token)
        self.device = Path(filename).stem
        self.error_status: dict[int, str] = {}
        self.health: dict[str, float] = {}  # health limits the spec sets (fleet.asicmon.limits)
        self.actions: dict[str, str] = {}  # control action -> the Python call it makes
        self.discovery: dict | None = None  # the discover statement's rule (fleet.asimov.discovery)
        self.discovery_rule: Any = None  # its rule's parse tree, for errors found at the end
        # What code generation assembles: module constants, the body of _open (once
        # statements) and of _probe (every refresh), and lines waiting to go before the
        # statement being compiled (rate and delta updates).
        self.module_consts: list[str] = []
        self.open_lines: list[str] = []
        self.probe_lines: list[str] = []
        self.hoisted: list[str] = []
        self.slot = 0  # rate/delta slots used
        self.tmp = 0  # out-parameter temporaries used
        self.uses_files = False
        self.uses_lib = False
        for name, (vtype, unit) in SPECIAL_NAMES.items():
            self.scope[name] = Symbol(name, "special", name, vtype, unit, used=True)

    def expr(self, node: Any, ctx: Ctx) -> Val:
        """Compiles an expression (supplied by the compiler)."""
        raise NotImplementedError

    def error(self, where: Any, message: str, expected: str = "") -> Abort:
        """Records an error at ``where`` (a token or a tree); raise what it returns."""
        line, column = position(where)
        source = self.lines[line - 1] if 0 < line <= len(self.lines) else ""
        self.errors.append(AsimovError(message, self.filename, line, column, source, expected))
        return Abort()

    def define(self, name_tok: Token, sym: Symbol) -> None:
        name = str(name_tok)
        old = self.scope.get(name)
        if name in self.reserved:
            raise self.error(
                name_tok, f"'{name}' is a built-in function and cannot be redefined", "another name"
            )
        if old is not None and name != "_":
            where = f" (line {old.meta.line})" if old.meta is not None else ""
            raise self.error(name_tok, f"'{name}' is already defined{where}", "a new name")
        sym.meta = name_tok
        self.scope[name] = sym

    @contextlib.contextmanager
    def loop_var(self, tok: Token, code: str) -> Iterator[None]:
        """The loop variable ``tok`` is in scope inside the ``with`` block."""
        name = str(tok)
        if name in self.scope:
            raise self.error(
                tok, f"loop variable '{name}' hides a name defined above", "a fresh name"
            )
        self.scope[name] = Symbol(name, "loop", code, "num", None, meta=tok, used=True)
        try:
            yield
        finally:
            self.scope.pop(name, None)

    def module_const(self, code: str) -> str:
        """A module-level constant of the generated code (a compiled regex, a flag table)."""
        name = f"_K{len(self.module_consts)}"
        self.module_consts.append(f"{name} = {code}")
        return name
