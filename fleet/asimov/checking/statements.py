"""Checking Asimov's statements, one function each, and `STATEMENTS`, the table the checker
dispatches on (keyed by the statement's node class of `fleet.asimov.language.nodes`).

A statement function takes ``(c, stmt, index)``: the checker, the statement's node and its
position in the spec. To add a statement kind or a top-level section, add its rule to
``grammar.lark`` (in ``_stmt``), its node class to `fleet.asimov.language.nodes` and its rule to
`fleet.asimov.language.builder`, a function here (or in a module of its own) that checks it and
records what code generation needs on the checker (then on `CheckedSpec`), a line in
`STATEMENTS`, and its code in `fleet.asimov.codegen`. Driver reads (bindings and bare
library calls) live in `fleet.asimov.checking.reads`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from fleet.asicmon.catalogue import CATALOGUE, DRIVER_STATUSES, RUNTIME_COUNTERS
from fleet.asicmon.limits import DEFAULT_LIMITS, LIMIT_NAMES
from fleet.asimov.actions import action_stmt
from fleet.asimov.cascades import cascade_stmt
from fleet.asimov.checking.checks import check_counter, suggest
from fleet.asimov.checking.reads import binding, call_stmt
from fleet.asimov.checking.units import parse_unit
from fleet.asimov.checking.values import ANY, NO, Ctx, Symbol
from fleet.asimov.discovery import discover_stmt
from fleet.asimov.events import diagnose_stmt, events_stmt
from fleet.asimov.language.nodes import (
    Action,
    Binding,
    CallStatement,
    Cascade,
    Const,
    Device,
    Diagnose,
    Discover,
    ErrorCode,
    Events,
    FaultRule,
    Health,
    Performance,
    Rule,
    StateField,
    Statement,
    StatsAssign,
)
from fleet.asimov.performance import performance_stmt
from fleet.asimov.rules import step_stmt
from fleet.asimov.state import fault_stmt, state_stmt

if TYPE_CHECKING:
    from fleet.asimov.checking.interface import CheckerInterface

__all__ = ["STATEMENTS"]


def device_stmt(c: CheckerInterface, stmt: Device, index: int) -> None:
    if index != 0:
        raise c.error(
            stmt,
            "'device' must be the first statement",
            "the device statement on the first line",
        )
    c.device = stmt.name.text


def const_stmt(c: CheckerInterface, stmt: Const, index: int) -> None:
    val = c.expr(stmt.value, Ctx())
    if val.const is NO:
        raise c.error(
            stmt.value,
            "a constant needs a value known when compiling",
            "numbers, strings and arithmetic on them",
        )
    unit = None if isinstance(val.const, (int, float)) else ANY
    vtype = "str" if isinstance(val.const, str) else "num"
    symbol = Symbol(stmt.name.text, "const", vtype, unit, where=stmt.name, value=val.const)
    c.define(stmt.name, symbol)
    c.use(symbol)


def error_stmt(c: CheckerInterface, stmt: ErrorCode, index: int) -> None:
    val = c.expr(stmt.code, Ctx())
    if not isinstance(val.const, int):
        raise c.error(
            stmt.code, "an error code must be an integer constant", "a number or a const name"
        )
    status = stmt.status.value
    allowed = [s for s in DRIVER_STATUSES if s != "ok"]
    if status not in allowed:
        raise c.error(
            stmt.status,
            f"unknown driver status {status!r}",
            "one of " + ", ".join(repr(s) for s in allowed),
        )
    c.error_status[val.const] = status


def stats_stmt(c: CheckerInterface, stmt: StatsAssign, index: int) -> None:
    where, name = stmt.counter, stmt.counter.text
    counter = CATALOGUE.get(name)
    if counter is None:
        raise c.error(
            where,
            f"unknown counter 'stats.{name}'",
            suggest(name, CATALOGUE, "a counter of the Asicmon catalogue"),
        )
    if name in RUNTIME_COUNTERS:
        raise c.error(
            where,
            f"stats.{name} is set by the monitor runtime, not by specs",
            "another counter",
        )
    if name in c.stats:
        raise c.error(
            where,
            f"stats.{name} is assigned twice (first on line {c.stats[name].where.line})",
            "one assignment per counter",
        )
    val = c.expr(stmt.value, Ctx())
    check_counter(c, counter, val, stmt.value)
    unit = parse_unit(counter.unit)
    vtype = "list" if counter.per_core else ("num" if counter.is_numeric else "str")
    elem = "num" if counter.per_core else "any"
    c.stats[name] = Symbol(name, "stat", vtype, unit, elem, where=where)


def health_stmt(c: CheckerInterface, stmt: Health, index: int) -> None:
    """``health NAME = value``: a threshold of Asicmon's health rules for this device type."""
    where, name = stmt.limit, stmt.limit.text
    default = getattr(DEFAULT_LIMITS, name, None) if name in LIMIT_NAMES else None
    if name not in LIMIT_NAMES:
        raise c.error(
            where, f"unknown health limit {name!r}", suggest(name, LIMIT_NAMES, "a health limit")
        )
    if name in c.health:
        raise c.error(where, f"health {name} is set twice", "one value per limit")
    val = c.expr(stmt.value, Ctx())
    whole = isinstance(default, int) and not isinstance(default, bool)
    if isinstance(val.const, bool) or not isinstance(val.const, int if whole else (int, float)):
        raise c.error(
            stmt.value,
            f"health {name} needs a {'whole number' if whole else 'number'} known when compiling",
            "a number, or arithmetic on numbers and constants",
        )
    c.health[name] = val.const


Check = Callable[["CheckerInterface", Statement, int], None]

STATEMENTS: dict[type, Check] = {
    Device: device_stmt,
    Const: const_stmt,
    ErrorCode: error_stmt,
    Binding: binding,
    StatsAssign: stats_stmt,
    CallStatement: call_stmt,
    Discover: discover_stmt,
    Health: health_stmt,
    Action: action_stmt,
    Performance: performance_stmt,
    Events: events_stmt,
    Diagnose: diagnose_stmt,
    StateField: state_stmt,
    FaultRule: fault_stmt,
    Rule: step_stmt,
    Cascade: cascade_stmt,
}
