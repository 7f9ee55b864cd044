"""Checking driver reads: bindings (``name = file(...)``, ``a, b = lib.fn(handle, out, out)``,
each optionally ``once`` or ``optional(...)``) and library calls made for their effect.

A read becomes lines of the generated ``_probe`` (every refresh) or ``_open`` (once); the
shape of the read (`fleet.asimov.language.nodes.read_form`) decides which lines.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fleet.asimov.checking.checks import check_iterable, check_lib_function
from fleet.asimov.checking.units import UnitError, parse_unit
from fleet.asimov.checking.values import ANY, Ctx, Symbol, Value
from fleet.asimov.errors import Abort
from fleet.asimov.language.nodes import (
    Binding,
    Call,
    CallStatement,
    Expr,
    Keyword,
    ListComp,
    Out,
    read_form,
)

if TYPE_CHECKING:
    from fleet.asimov.checking.interface import CheckerInterface

__all__ = ["binding", "call_stmt"]


def call_stmt(c: CheckerInterface, stmt: CallStatement, index: int) -> None:
    node = stmt.value
    if not (isinstance(node, Call) and node.lib_function is not None):
        raise c.error(
            node,
            "a statement on its own must be a library call",
            "a library call such as lib.init()",
        )
    ctx = Ctx(reads=True, once=stmt.once)
    if node.out_count:
        out_call(c, node, ctx)
    else:
        c.expr(node, ctx)


def binding(c: CheckerInterface, stmt: Binding, index: int) -> None:
    names = stmt.targets
    unit = ANY
    if stmt.annotation is not None:
        unit_name = stmt.annotation.unit
        try:
            unit = parse_unit(unit_name.text)
        except UnitError as exc:
            raise c.error(
                unit_name, str(exc), "a unit such as W, mW, C, mC, MHz, B, KiB, count, us"
            ) from None
    try:
        val = read_source(c, stmt.value, Ctx(reads=True, once=stmt.once), len(names))
    except Abort:
        for name in names:  # defined anyway, so that later uses do not cascade into errors
            if name.text not in c.scope:
                c.scope[name.text] = symbol = Symbol(name.text, "binding", where=name)
                c.use(symbol)
        raise
    if val.unit is not ANY and val.unit is not None and unit is not ANY and not val.unit.same(unit):
        raise c.error(
            stmt.annotation,
            f"the annotation says {unit} but the value is in {val.unit}",
            f"the unit {val.unit} (or no annotation)",
        )
    if unit is ANY:
        unit = val.unit
    single = len(names) == 1
    for name in names:
        c.define(
            name,
            Symbol(
                name.text,
                "once" if stmt.once else "binding",
                val.vtype if single else "any",
                unit if single or unit is not ANY else ANY,
                val.elem,
                where=name,
            ),
        )


def read_source(c: CheckerInterface, node: Expr, ctx: Ctx, targets: int) -> Value:
    """Checks what a binding reads into its ``targets`` names."""
    form = read_form(node)
    if form == "optional":
        if len(node.args) != 1:
            raise c.error(node, "optional() takes one read", "optional(<a read>)")
        (inner,) = node.args
        return read_source(c, inner, ctx, targets)
    if form == "out_loop":
        return out_call_loop(c, node, ctx, targets)
    if form == "out_call":
        outs = out_call(c, node, ctx)
        if outs != targets:
            raise c.error(
                node,
                f"{node.lib_function}() fills {outs} out-parameter{'s' * (outs != 1)} but {targets} name{'s' * (targets != 1)} {'are' if targets != 1 else 'is'} assigned",
                f"{outs} name{'s' * (outs != 1)} on the left",
            )
        return Value("any", ANY)
    if targets != 1:
        raise c.error(
            node,
            "only a call with out-parameters can fill several names",
            "one name on the left",
        )
    return c.expr(node, ctx)


def out_call(c: CheckerInterface, node: Call, ctx: Ctx) -> int:
    """A C-style call: returns a status, fills out-parameters. The number of them."""
    if node.lib_function is None:
        raise c.error(
            node, "only library functions take out-parameters", "lib.<function>(..., out)"
        )
    check_lib_function(c, node.func.attr)
    c.uses_lib = True
    for arg in node.args:
        if isinstance(arg, Keyword):
            raise c.error(
                arg, "library calls take positional arguments only", "an expression or out"
            )
        if not isinstance(arg, Out):
            c.expr(arg, ctx)
    return node.out_count


def out_call_loop(c: CheckerInterface, node: ListComp, ctx: Ctx, targets: int) -> Value:
    it = c.expr(node.loop.iterable, ctx)
    check_iterable(c, node.loop.iterable, it)
    with c.loop_var(node.loop.var):
        outs = out_call(c, node.element, ctx)
    if outs != targets:
        raise c.error(
            node,
            f"{node.element.lib_function}() fills {outs} out-parameters but {targets} names are assigned",
            f"{outs} names on the left",
        )
    return Value("list", ANY)
