"""Checking Asimov's expressions: one function per node class of `fleet.asimov.language.nodes`, in
`EXPRESSIONS`, each returning what is known of the value (a `Value`: type, unit, constant).

Calls of built-in functions go to `fleet.asimov.checking.builtins`; ``lib.<function>(...)`` calls
read the driver and are only allowed where reads are (in bindings).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from fleet.asicmon.catalogue import CATALOGUE, RUNTIME_COUNTERS
from fleet.asimov.checking.builtins import AGGREGATES, BUILTINS, aggregate
from fleet.asimov.checking.checks import (
    check_attribute,
    check_iterable,
    check_lib_function,
    require_numbers,
    same_unit,
    suggest,
)
from fleet.asimov.checking.values import ANY, NO, Ctx, Value, describe, fold, mul_units
from fleet.asimov.language import nodes

if TYPE_CHECKING:
    from fleet.asimov.checking.interface import CheckerInterface

__all__ = ["EXPRESSIONS"]


def number(c: CheckerInterface, node: nodes.Number, ctx: Ctx) -> Value:
    return Value("num", None, const=node.value)


def string(c: CheckerInterface, node: nodes.String, ctx: Ctx) -> Value:
    return Value("str", ANY, literals=(node.value,), const=node.value)


def boolean(c: CheckerInterface, node: nodes.Boolean, ctx: Ctx) -> Value:
    return Value("bool", None, const=node.value)


def none(c: CheckerInterface, node: nodes.NoneLiteral, ctx: Ctx) -> Value:
    return Value("none", ANY, const=None)


def name(c: CheckerInterface, node: nodes.Name, ctx: Ctx) -> Value:
    sym = c.resolve(node.id, node, ctx)
    return Value(sym.vtype, sym.unit, sym.elem, const=sym.value, ref=sym)


def stat(c: CheckerInterface, node: nodes.Stat, ctx: Ctx) -> Value:
    where, name = node.counter, node.counter.text
    if name not in CATALOGUE:
        raise c.error(
            where,
            f"unknown counter 'stats.{name}'",
            suggest(name, CATALOGUE, "a counter of the Asicmon catalogue"),
        )
    if ctx.reads:
        raise c.error(
            where, "bindings cannot use stats counters", "bindings, constants and loop variables"
        )
    if name in RUNTIME_COUNTERS:
        raise c.error(
            where,
            f"stats.{name} is set by the runtime after the probe and cannot be used in a spec",
            "another counter",
        )
    if name not in c.stats:
        raise c.error(
            where,
            f"stats.{name} is used before it is assigned",
            f"an assignment to stats.{name} above this line",
        )
    sym = c.stats[name]
    return Value(sym.vtype, sym.unit, sym.elem, stat_kind=CATALOGUE[name].kind, ref=sym)


def attr(c: CheckerInterface, node: nodes.Attr, ctx: Ctx) -> Value:
    obj = c.expr(node.obj, ctx)
    if obj.vtype == "lib":
        check_lib_function(c, node.attr, constant=True)
    else:
        check_attribute(c, node.attr)
    if obj.vtype not in ("any", "lib"):
        raise c.error(
            node.attr,
            f"{describe(obj.vtype)} has no attribute '{node.attr.text}'",
            "a value returned by a library call",
        )
    return Value("any", ANY)


def subscript(c: CheckerInterface, node: nodes.Subscript, ctx: Ctx) -> Value:
    obj = c.expr(node.obj, ctx)
    idx = c.expr(node.index, ctx)
    if obj.vtype not in ("any", "list", "dict"):
        raise c.error(node.obj, f"cannot index {describe(obj.vtype)}", "a list")
    if idx.vtype not in ("any", "num", "str"):
        raise c.error(
            node.index, f"an index must be a number, not {describe(idx.vtype)}", "a number"
        )
    return Value(obj.elem if obj.vtype == "list" else "any", obj.unit, stat_kind=obj.stat_kind)


def list_display(c: CheckerInterface, node: nodes.ListExpr, ctx: Ctx) -> Value:
    items = [c.expr(item, ctx) for item in node.items]
    unit = same_unit(c, node, items, "list items") if items else ANY
    elem = items[0].vtype if items and all(i.vtype == items[0].vtype for i in items) else "any"
    return Value("list", unit, elem)


def dict_display(c: CheckerInterface, node: nodes.DictExpr, ctx: Ctx) -> Value:
    const: dict | None = {}
    for pair in node.pairs:
        key = c.expr(pair.key, ctx)
        if key.vtype in ("list", "dict"):
            raise c.error(
                pair.key,
                f"a dictionary key cannot be {describe(key.vtype)}",
                "a number or a string",
            )
        value = c.expr(pair.value, ctx)
        if const is not None and key.const is not NO and value.const is not NO:
            const[key.const] = value.const
        else:
            const = None
    return Value("dict", ANY, const=const if const is not None else NO)


def comprehension(c: CheckerInterface, element: nodes.Expr, loop: nodes.For, ctx: Ctx) -> Value:
    """``element for var in iterable``: what is known of the element."""
    it = c.expr(loop.iterable, ctx)
    check_iterable(c, loop.iterable, it)
    with c.loop_var(loop.var):
        elem = c.expr(element, ctx)
    if isinstance(element, nodes.Call) and element.out_count:
        raise c.error(
            element,
            "a call with out-parameters must be the whole right-hand side of a binding",
            "name, ... = [lib.f(..., out) for i in ...]",
        )
    return elem


def list_comprehension(c: CheckerInterface, node: nodes.ListComp, ctx: Ctx) -> Value:
    elem = comprehension(c, node.element, node.loop, ctx)
    return Value("list", elem.unit, elem.vtype, is_rate=elem.is_rate)


def call_generator(c: CheckerInterface, node: nodes.CallGen, ctx: Ctx) -> Value:
    fn = node.func.id if isinstance(node.func, nodes.Name) else None
    if fn not in AGGREGATES:
        raise c.error(
            node.func,
            f"{fn or 'this'} cannot take a generator",
            "one of " + ", ".join(AGGREGATES),
        )
    elem = comprehension(c, node.element, node.loop, ctx)
    return aggregate(c, node, fn, Value("list", elem.unit, elem.vtype, is_rate=elem.is_rate))


def call(c: CheckerInterface, node: nodes.Call, ctx: Ctx) -> Value:
    if node.lib_function is not None:
        check_lib_function(c, node.func.attr)
        if not ctx.reads:
            raise c.error(
                node,
                "library calls read the driver and belong in bindings",
                "name = lib.function(...) above, then use the name",
            )
        if node.out_count:
            raise c.error(
                node,
                "a call with out-parameters must be the whole right-hand side of a binding",
                "name = lib.function(..., out)",
            )
        c.uses_lib = True
        for arg in node.args:
            c.expr(arg, ctx)
        return Value("any", ANY)
    fn = node.function_name
    if fn is None:
        if isinstance(node.func, nodes.Attr):  # x.__class__.f(...): the first fault on the left
            c.expr(node.func, ctx)
        raise c.error(
            node.func,
            "only built-in functions and lib.<function> can be called",
            "one of " + ", ".join(BUILTINS),
        )
    for arg in node.args:
        if isinstance(arg, nodes.Out):
            raise c.error(arg, "only library calls take out-parameters", "an expression")
    handler = BUILTINS.get(fn)
    if handler is None:
        if fn in c.scope:
            raise c.error(
                node.func, f"'{fn}' is not a function", "a built-in function or lib.<function>"
            )
        raise c.error(
            node.func,
            f"unknown function '{fn}'",
            suggest(fn, BUILTINS, "a built-in function or lib.<function>"),
        )
    keywords = {arg.name.text: arg.value for arg in node.args if isinstance(arg, nodes.Keyword)}
    return handler(c, fn, node, node.positional, keywords, ctx)


def binary(c: CheckerInterface, node: nodes.BinOp, ctx: Ctx) -> Value:
    op = node.op
    left, right = c.expr(node.left, ctx), c.expr(node.right, ctx)
    if op == "+" and left.vtype == "str" and right.vtype == "str":
        const = left.const + right.const if left.const is not NO and right.const is not NO else NO
        return Value("str", ANY, const=const)
    require_numbers(c, [node.left, node.right], [left, right], op)
    if op in ("+", "-"):
        unit = same_unit(c, node, [left, right], f"the operands of '{op}'")
    elif op in ("*", "/", "//", "%"):
        unit = mul_units(left.unit, right.unit, op)
    elif op == "**":
        unit = None if left.unit is None and right.unit is None else ANY
    else:  # bit operations
        unit = None if left.unit is None else ANY
    const = NO
    if left.const is not NO and right.const is not NO:
        try:
            const = fold(op, left.const, right.const)
        except (ArithmeticError, TypeError, ValueError):
            raise c.error(
                node, f"'{op}' cannot be computed on these constants", "valid arithmetic"
            ) from None
    return Value("num", unit, is_rate=left.is_rate or right.is_rate, const=const)


def neg(c: CheckerInterface, node: nodes.Neg, ctx: Ctx) -> Value:
    v = c.expr(node.operand, ctx)
    require_numbers(c, [node.operand], [v], "-")
    const = -v.const if v.const is not NO else NO
    return Value("num", v.unit, is_rate=v.is_rate, const=const)


def comparison(c: CheckerInterface, node: nodes.Compare, ctx: Ctx) -> Value:
    left, right = c.expr(node.left, ctx), c.expr(node.right, ctx)
    if {left.vtype, right.vtype} <= {"num", "bool", "any"}:
        same_unit(c, node, [left, right], f"the operands of '{node.op}'")
    return Value("bool", None)


def not_(c: CheckerInterface, node: nodes.Not, ctx: Ctx) -> Value:
    c.expr(node.operand, ctx)
    return Value("bool", None)


def logic(c: CheckerInterface, node: nodes.BoolOp, ctx: Ctx) -> Value:
    left, right = c.expr(node.left, ctx), c.expr(node.right, ctx)
    vtype = left.vtype if left.vtype == right.vtype else "any"
    return Value(vtype, left.unit if left.unit == right.unit else ANY)


def if_else(c: CheckerInterface, node: nodes.IfElse, ctx: Ctx) -> Value:
    a, _, b = c.expr(node.body, ctx), c.expr(node.test, ctx), c.expr(node.orelse, ctx)
    if a.vtype in ("num", "any") and b.vtype in ("num", "any"):
        unit = same_unit(c, node, [a, b], "the two branches")
    else:
        unit = ANY
    if a.vtype == b.vtype:
        vtype = a.vtype
    elif "none" not in (a.vtype, b.vtype):
        vtype = "any"
    else:  # x if ... else None: the type of x
        vtype = b.vtype if a.vtype == "none" else a.vtype
    literals = None
    if a.literals is not None and b.literals is not None:
        literals = a.literals + b.literals
    return Value(vtype, unit, a.elem, a.is_rate or b.is_rate, literals)


Expression = Callable[["CheckerInterface", nodes.Expr, Ctx], Value]

EXPRESSIONS: dict[type, Expression] = {
    nodes.Number: number,
    nodes.String: string,
    nodes.Boolean: boolean,
    nodes.NoneLiteral: none,
    nodes.Name: name,
    nodes.Stat: stat,
    nodes.Attr: attr,
    nodes.Subscript: subscript,
    nodes.ListExpr: list_display,
    nodes.DictExpr: dict_display,
    nodes.ListComp: list_comprehension,
    nodes.CallGen: call_generator,
    nodes.Call: call,
    nodes.BinOp: binary,
    nodes.Neg: neg,
    nodes.Compare: comparison,
    nodes.Not: not_,
    nodes.BoolOp: logic,
    nodes.IfElse: if_else,
}
