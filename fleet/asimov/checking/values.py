"""What the checker knows about a value: its type, unit and constant value; the names in
scope; and the arithmetic of units and constants.

Units themselves are `fleet.asimov.checking.units.Unit`; a value's unit is a `Unit`, None for a
plain number, or `ANY` when it is not known (and not checked).
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Any

from fleet.asimov.checking.units import Unit

__all__ = ["ANY", "NO", "SPECIAL_NAMES", "Ctx", "Symbol", "Value", "describe", "fold", "mul_units"]

ANY = "any"  # unit not known: not checked
NO = object()  # no compile-time value
SPECIAL_NAMES = {"index": ("num", None), "lib": ("lib", ANY), "now": ("num", None)}


@dataclass(frozen=True)
class Value:
    """What the checker knows about an expression (kept per node in `CheckedSpec.facts`)."""

    vtype: str = "any"  # num | str | bool | list | dict | range | lib | none | any
    unit: Any = ANY  # a Unit, None for a plain number, or ANY
    elem: str = "any"  # element type of lists
    is_rate: bool = False
    literals: tuple[str, ...] | None = None  # the string values it can take, if known
    const: Any = NO
    stat_kind: str | None = None  # kind of the stats counter it reads directly
    # What it stands for: the `Symbol` of a name; for some built-in calls what the check
    # resolved (see `fleet.asimov.checking.builtins`).
    ref: Any = None


@dataclass(frozen=True, eq=False)
class Symbol:
    """A name in scope: a constant, a driver read (every refresh or once), a loop variable,
    a stats counter, or one of the special names (index, lib, now)."""

    name: str
    kind: str  # const | binding | once | loop | special | stat
    vtype: str = "any"
    unit: Any = ANY
    elem: str = "any"
    where: Any = None  # the `Ident` that defines it
    value: Any = NO  # a constant's value


@dataclass(frozen=True)
class Ctx:
    """Where an expression is checked: in a binding (reads allowed), in a once statement."""

    reads: bool = False
    once: bool = False


def mul_units(a: Any, b: Any, op: str) -> Any:
    """The unit of ``a op b`` for ``*``, ``/``, ``//`` and ``%``."""
    if a is ANY or b is ANY:
        return ANY
    if a is None and b is None:
        return None
    one = Unit((), 1.0)
    if op in ("//", "%"):
        return a if b is None else ANY
    result = (a or one) * (b or one) if op == "*" else (a or one) / (b or one)
    return Unit(result.dims, result.scale)


def _power(a: Any, b: Any) -> Any:
    if isinstance(b, int) and b > 4096:
        raise ValueError("too large")
    return a**b


_FOLD = {
    "+": operator.add,
    "-": operator.sub,
    "*": operator.mul,
    "/": operator.truediv,
    "//": operator.floordiv,
    "%": operator.mod,
    "**": _power,
    "|": operator.or_,
    "&": operator.and_,
    "<<": operator.lshift,
    ">>": operator.rshift,
}


def fold(op: str, a: Any, b: Any) -> Any:
    """``a op b`` computed when compiling (constant folding)."""
    try:
        return _FOLD[op](a, b)
    except KeyError:
        raise ValueError(op) from None


_DESCRIPTIONS = {
    "num": "a number",
    "str": "text",
    "bool": "a truth value",
    "list": "a list",
    "dict": "a dictionary",
    "range": "a range",
    "lib": "the library",
    "none": "None",
    "any": "a value",
    "gauge": "a gauge",
    "counter": "a counter",
    "info": "an info",
    "state": "a state",
}


def describe(vtype: str) -> str:
    """A value type (or a counter kind) as error messages say it: "a number"."""
    return _DESCRIPTIONS.get(vtype, vtype)
