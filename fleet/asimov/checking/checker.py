"""Checking a spec's typed tree against the Asicmon catalogue: names, kinds, units, counters.

`check` walks the statements in order with a `Checker`, which holds what is known so far
(the names in scope, the counters assigned, the errors found) for that one spec. Each
statement kind is checked by a function of `fleet.asimov.checking.statements` (driver reads in
`reads`, ``action`` in `actions`, ``discover`` in `discovery`), each expression form by one
of `fleet.asimov.checking.expressions`, each built-in function by one of `fleet.asimov.checking.builtins`.

The result is a `CheckedSpec`: the tree and, for every expression, what the checker found
(`Value`: type, unit, constant value, the symbol a name stands for). Code generation
(`fleet.asimov.codegen`) reads it and changes nothing in it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

from fleet.asimov.checking.builtins import BUILTINS, PARSERS
from fleet.asimov.checking.checks import suggest
from fleet.asimov.checking.expressions import EXPRESSIONS
from fleet.asimov.checking.statements import STATEMENTS
from fleet.asimov.checking.values import SPECIAL_NAMES, Ctx, Symbol, Value
from fleet.asimov.discovery import check_discovery_fits
from fleet.asimov.errors import Abort, AsimovError, SpecErrors
from fleet.asimov.language.nodes import Expr, Ident, Node, Out, Spec, Statement
from fleet.asimov.rules import finish_rules
from fleet.asimov.state import finish_state

__all__ = ["CheckedSpec", "Checker", "check"]


@dataclass(frozen=True)
class CheckedSpec:
    """A spec that passed every check: its tree, and what was found about each part of it."""

    filename: str
    device: str
    statements: tuple[Statement, ...]
    facts: Mapping[Node, Value]  # every expression checked -> what is known of it
    symbols: tuple[Symbol, ...]  # the names defined, in order of definition
    counters: tuple[str, ...]  # the stats counters assigned, in order
    error_status: Mapping[int, str]
    health: Mapping[str, float]  # health limits the spec sets (fleet.asicmon.limits)
    actions: tuple[str, ...]  # control actions declared, in order
    discovery: dict | None  # the discover statement's rule (fleet.asimov.discovery)
    events: dict | None  # {"catalogue", "sources"} of the events statement (fleet.asimov.events)
    diagnostic: tuple[str, ...]  # the diagnose statement's command, as arguments (no shell)
    uses_files: bool
    uses_lib: bool
    # class -> fitted parameters of the performance model (fleet.asimov.performance)
    performance: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    # the device double (fleet.asimov.state): its typed fields and each fault's numbers
    state: Mapping[str, object] = field(default_factory=dict)
    fault_rules: Mapping[str, tuple] = field(default_factory=dict)
    step_rules: Mapping[str, tuple] = field(default_factory=dict)
    rules: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # fleet.asimov.rules
    cascades: Mapping[str, dict] = field(default_factory=dict)  # fleet.asimov.cascades


class Checker:
    """What is known while one spec is checked, statement after statement."""

    reserved = frozenset(BUILTINS) | frozenset(PARSERS)  # no spec may redefine these

    def __init__(self, text: str, filename: str) -> None:
        self.filename = filename
        self.lines = text.splitlines()
        self.errors: list[AsimovError] = []
        self.scope: dict[str, Symbol] = {
            name: Symbol(name, "special", vtype, unit)
            for name, (vtype, unit) in SPECIAL_NAMES.items()
        }
        self.used: set[Symbol] = set()
        self.stats: dict[str, Symbol] = {}  # counters assigned so far
        self.facts: dict[Node, Value] = {}
        self.device = Path(filename).stem
        self.error_status: dict[int, str] = {}
        self.health: dict[str, float] = {}
        self.actions: list[str] = []
        self.performance: dict[str, dict[str, float]] = {}
        self.state: dict[str, object] = {}
        self.fault_rules: dict[str, tuple] = {}
        self.step_rules: dict[str, tuple] = {}
        self.rules: dict[str, list[str]] = {}  # step or command -> its rules' Python lines
        self.rule_locals: dict[str, set[str]] = {}
        self.cascades: dict[str, dict] = {}  # driver-error fault -> its cascade (fleet.asimov.cascades)
        self.discovery: dict | None = None
        self.events: dict | None = None
        self.diagnostic: tuple[str, ...] = ()
        self.discovery_rule: Node | None = None  # for errors found after every statement
        self.uses_files = False
        self.uses_lib = False

    def expr(self, node: Expr, ctx: Ctx) -> Value:
        """Checks an expression; what is found is kept for code generation."""
        handler = EXPRESSIONS.get(type(node))
        if handler is None:  # ``out`` or ``name=value`` where an expression belongs
            rule = "out_arg" if isinstance(node, Out) else "kwarg"
            raise self.error(node, f"unsupported expression {rule}", "a simpler expression")
        value = self.facts[node] = handler(self, node, ctx)
        return value

    def note(self, node: Node, value: Value) -> Value:
        """Keeps what was found about a node the checker reads without `expr`."""
        self.facts[node] = value
        return value

    def error(self, where: Node, message: str, expected: str = "") -> Abort:
        """Records an error at ``where``; raise what it returns."""
        line, column = where.line, where.column
        source = self.lines[line - 1] if 0 < line <= len(self.lines) else ""
        self.errors.append(AsimovError(message, self.filename, line, column, source, expected))
        return Abort()

    def use(self, symbol: Symbol) -> None:
        self.used.add(symbol)

    def resolve(self, name: str, where: Node, ctx: Ctx) -> Symbol:
        """The symbol ``name`` stands for at ``where`` (a name, or a field of a file path)."""
        sym = self.scope.get(name)
        if sym is None:
            known = [n for n, s in self.scope.items() if s.kind != "special"] + list(SPECIAL_NAMES)
            if name in self.reserved:
                raise self.error(where, f"'{name}' is a function", f"a call: {name}(...)")
            raise self.error(
                where,
                f"unknown name '{name}'",
                suggest(name, known, "a binding, constant or loop variable defined above"),
            )
        if ctx.once and sym.kind == "binding":
            raise self.error(
                where,
                f"'{name}' is read every refresh; a once statement can only use once bindings and constants",
                "a once binding or a constant",
            )
        if ctx.once and name == "now":
            raise self.error(
                where,
                "'now' changes every refresh and cannot be used in a once statement",
                "a once binding or a constant",
            )
        self.used.add(sym)
        if sym.kind == "special" and name == "lib":
            self.uses_lib = True
        return sym

    def define(self, name: Ident, symbol: Symbol) -> None:
        old = self.scope.get(name.text)
        if name.text in self.reserved:
            raise self.error(
                name,
                f"'{name.text}' is a built-in function and cannot be redefined",
                "another name",
            )
        if old is not None and name.text != "_":
            where = f" (line {old.where.line})" if old.where is not None else ""
            raise self.error(name, f"'{name.text}' is already defined{where}", "a new name")
        self.scope[name.text] = symbol

    @contextlib.contextmanager
    def loop_var(self, var: Ident) -> Iterator[Symbol]:
        """The loop variable ``var`` is in scope inside the ``with`` block."""
        if var.text in self.scope:
            raise self.error(
                var, f"loop variable '{var.text}' hides a name defined above", "a fresh name"
            )
        symbol = self.scope[var.text] = Symbol(var.text, "loop", "num", None, where=var)
        self.used.add(symbol)
        try:
            yield symbol
        finally:
            self.scope.pop(var.text, None)

    def check_reads_used(self) -> None:
        for sym in self.scope.values():
            if (
                sym.kind in ("binding", "once")
                and sym not in self.used
                and not sym.name.startswith("_")
            ):
                self.error(
                    sym.where,
                    f"'{sym.name}' is read from the driver but never used",
                    "a use in a stats counter or another binding (or remove the read)",
                )

    def result(self, spec: Spec) -> CheckedSpec:
        return CheckedSpec(
            filename=self.filename,
            device=self.device,
            statements=spec.statements,
            facts=MappingProxyType(self.facts),
            symbols=tuple(self.scope.values()),
            counters=tuple(self.stats),
            error_status=MappingProxyType(self.error_status),
            health=MappingProxyType(self.health),
            actions=tuple(self.actions),
            discovery=self.discovery,
            events=self.events,
            diagnostic=self.diagnostic,
            uses_files=self.uses_files,
            uses_lib=self.uses_lib,
            performance=MappingProxyType(self.performance),
            state=MappingProxyType(self.state),
            fault_rules=MappingProxyType(self.fault_rules),
            step_rules=MappingProxyType(self.step_rules),
            rules=MappingProxyType({k: tuple(v) for k, v in self.rules.items()}),
            cascades=MappingProxyType(self.cascades),
        )


def check(spec: Spec, text: str, filename: str = "<spec>") -> CheckedSpec:
    """Checks a parsed spec; raises `SpecErrors` with every error found, in source order."""
    c = Checker(text, filename)
    for index, statement in enumerate(spec.statements):
        with contextlib.suppress(Abort):
            STATEMENTS[type(statement)](c, statement, index)
    if not c.errors:  # unused reads and a misfit discovery: only in a spec otherwise fine
        c.check_reads_used()
        check_discovery_fits(c)
        if spec.statements:
            finish_state(c, spec.statements[0])
            finish_rules(c, spec.statements[0])
    if c.errors:
        raise SpecErrors(c.errors)
    return c.result(spec)
