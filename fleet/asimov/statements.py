"""Asimov's statements, one function each, and `STATEMENTS`, the table the compiler
dispatches on (keyed by the grammar rule of the statement).

A statement function takes ``(c, stmt, index)``: the compilation, the statement's parse
tree and its position in the spec. To add a statement kind or a top-level section, add its
rule to ``grammar.lark`` (in ``_stmt``), a function here (or in a module of its own) that
checks it and records what code generation needs on the `Compilation`, and a line in
`STATEMENTS`. Driver reads (bindings and bare library calls) live in `fleet.asimov.reads`.
"""

from __future__ import annotations

from collections.abc import Callable

from lark import Tree

from fleet.asicmon.catalogue import CATALOGUE, DRIVER_STATUSES, RUNTIME_COUNTERS
from fleet.asicmon.limits import DEFAULT_LIMITS, LIMIT_NAMES
from fleet.asimov.actions import action_stmt
from fleet.asimov.checks import check_counter, suggest
from fleet.asimov.codegen import guarded
from fleet.asimov.discovery import discover_stmt
from fleet.asimov.reads import binding, call_stmt
from fleet.asimov.state import Compilation
from fleet.asimov.tree import string_value
from fleet.asimov.units import parse_unit
from fleet.asimov.values import ANY, NO, Ctx, Symbol

__all__ = ["STATEMENTS"]


def device_stmt(c: Compilation, stmt: Tree, index: int) -> None:
    if index != 0:
        raise c.error(
            stmt,
            "'device' must be the first statement",
            "the device statement on the first line",
        )
    c.device = str(stmt.children[0])


def const_stmt(c: Compilation, stmt: Tree, index: int) -> None:
    name, value_node = stmt.children
    val = c.expr(value_node, Ctx())
    if val.const is NO:
        raise c.error(
            value_node,
            "a constant needs a value known when compiling",
            "numbers, strings and arithmetic on them",
        )
    unit = None if isinstance(val.const, (int, float)) else ANY
    vtype = "str" if isinstance(val.const, str) else "num"
    c.define(
        name,
        Symbol(str(name), "const", repr(val.const), vtype, unit, value=val.const, used=True),
    )


def error_stmt(c: Compilation, stmt: Tree, index: int) -> None:
    code_node, status_tok = stmt.children
    val = c.expr(code_node, Ctx())
    if not isinstance(val.const, int):
        raise c.error(
            code_node, "an error code must be an integer constant", "a number or a const name"
        )
    status = string_value(status_tok)
    allowed = [s for s in DRIVER_STATUSES if s != "ok"]
    if status not in allowed:
        raise c.error(
            status_tok,
            f"unknown driver status {status!r}",
            "one of " + ", ".join(repr(s) for s in allowed),
        )
    c.error_status[val.const] = status


def stats_stmt(c: Compilation, stmt: Tree, index: int) -> None:
    name_tok, value = stmt.children
    name = str(name_tok)
    counter = CATALOGUE.get(name)
    if counter is None:
        raise c.error(
            name_tok,
            f"unknown counter 'stats.{name}'",
            suggest(name, CATALOGUE, "a counter of the Asicmon catalogue"),
        )
    if name in RUNTIME_COUNTERS:
        raise c.error(
            name_tok,
            f"stats.{name} is set by the monitor runtime, not by specs",
            "another counter",
        )
    if name in c.stats:
        first = c.stats[name][1]
        raise c.error(
            name_tok,
            f"stats.{name} is assigned twice (first on line {first.line})",
            "one assignment per counter",
        )
    val = c.expr(value, Ctx())
    check_counter(c, counter, val, value)
    code = f"s_{name}"
    c.probe_lines += c.hoisted
    c.hoisted = []
    c.probe_lines += guarded(code, val.code)
    unit = parse_unit(counter.unit)
    vtype = "list" if counter.per_core else ("num" if counter.is_numeric else "str")
    c.stats[name] = (
        Symbol(name, "stat", code, vtype, unit, "num" if counter.per_core else "any"),
        name_tok,
    )


def health_stmt(c: Compilation, stmt: Tree, index: int) -> None:
    """``health NAME = value``: a threshold of Asicmon's health rules for this device type."""
    name_tok, value_node = stmt.children
    name = str(name_tok)
    default = getattr(DEFAULT_LIMITS, name, None) if name in LIMIT_NAMES else None
    if name not in LIMIT_NAMES:
        raise c.error(name_tok, f"unknown health limit {name!r}", suggest(name, LIMIT_NAMES, "a health limit"))
    if name in c.health:
        raise c.error(name_tok, f"health {name} is set twice", "one value per limit")
    val = c.expr(value_node, Ctx())
    whole = isinstance(default, int) and not isinstance(default, bool)
    if isinstance(val.const, bool) or not isinstance(val.const, int if whole else (int, float)):
        raise c.error(
            value_node,
            f"health {name} needs a {'whole number' if whole else 'number'} known when compiling",
            "a number, or arithmetic on numbers and constants",
        )
    c.health[name] = val.const


def once_stmt(c: Compilation, stmt: Tree, index: int) -> None:
    inner = stmt.children[0]
    if inner.data == "assign_stmt":
        binding(c, inner, once=True)
    else:
        call_stmt(c, inner, once=True)


def assign_stmt(c: Compilation, stmt: Tree, index: int) -> None:
    binding(c, stmt, once=False)


def expr_stmt(c: Compilation, stmt: Tree, index: int) -> None:
    call_stmt(c, stmt, once=False)


Statement = Callable[[Compilation, Tree, int], None]

STATEMENTS: dict[str, Statement] = {
    "device_stmt": device_stmt,
    "const_stmt": const_stmt,
    "error_stmt": error_stmt,
    "once_stmt": once_stmt,
    "assign_stmt": assign_stmt,
    "stats_stmt": stats_stmt,
    "expr_stmt": expr_stmt,
    "discover_stmt": discover_stmt,
    "health_stmt": health_stmt,
    "action_stmt": action_stmt,
}
