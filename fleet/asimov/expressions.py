"""Asimov's expressions: each parse-tree rule of an expression compiles to a `Val` (its
Python code and what is known of its type, unit and value) through `EXPRESSIONS`.

Calls of built-in functions go to `fleet.asimov.builtins`; ``lib.<function>(...)`` calls
read the driver and are only allowed where reads are (in bindings).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from lark import Tree

from fleet.asicmon.catalogue import CATALOGUE, RUNTIME_COUNTERS
from fleet.asimov.builtins import AGGREGATES, BUILTINS, aggregate
from fleet.asimov.checks import check_iterable, require_numbers, same_unit, suggest
from fleet.asimov.state import SPECIAL_NAMES, Compilation
from fleet.asimov.tree import (
    call_args,
    callee_name,
    is_lib_call,
    out_count,
    plain_name,
    string_value,
)
from fleet.asimov.values import ANY, NO, Ctx, Val, describe, fold, mul_units

__all__ = ["EXPRESSIONS", "compile_expr"]


def compile_expr(c: Compilation, node: Tree, ctx: Ctx) -> Val:
    handler = EXPRESSIONS.get(node.data)
    if handler is None:  # pragma: no cover - grammar and compiler out of step
        raise c.error(node, f"unsupported expression {node.data}", "a simpler expression")
    return handler(c, node, ctx)


def number(c: Compilation, node: Tree, ctx: Ctx) -> Val:
    text = str(node.children[0]).replace("_", "")
    value = (
        int(text, 0)
        if text.lower().startswith("0x")
        else (float(text) if any(ch in text for ch in ".eE") else int(text))
    )
    return Val(repr(value), "num", None, const=value)


def string(c: Compilation, node: Tree, ctx: Ctx) -> Val:
    value = string_value(node.children[0])
    return Val(repr(value), "str", ANY, literals=(value,), const=value)


def true(c: Compilation, node: Tree, ctx: Ctx) -> Val:
    return Val("True", "bool", None, const=True)


def false(c: Compilation, node: Tree, ctx: Ctx) -> Val:
    return Val("False", "bool", None, const=False)


def none(c: Compilation, node: Tree, ctx: Ctx) -> Val:
    return Val("None", "none", ANY, const=None)


def name(c: Compilation, node: Tree, ctx: Ctx) -> Val:
    tok = node.children[0]
    name = str(tok)
    sym = c.scope.get(name)
    if sym is None:
        known = [n for n, s in c.scope.items() if s.kind != "special"] + list(SPECIAL_NAMES)
        if name in c.reserved:
            raise c.error(tok, f"'{name}' is a function", f"a call: {name}(...)")
        raise c.error(
            tok,
            f"unknown name '{name}'",
            suggest(name, known, "a binding, constant or loop variable defined above"),
        )
    if ctx.once and sym.kind == "binding":
        raise c.error(
            tok,
            f"'{name}' is read every refresh; a once statement can only use once bindings and constants",
            "a once binding or a constant",
        )
    if ctx.once and name == "now":
        raise c.error(
            tok,
            "'now' changes every refresh and cannot be used in a once statement",
            "a once binding or a constant",
        )
    sym.used = True
    if sym.kind == "special" and name == "lib":
        c.uses_lib = True
    return Val(sym.code, sym.vtype, sym.unit, sym.elem, const=sym.value)


def stat(c: Compilation, node: Tree, ctx: Ctx) -> Val:
    tok = node.children[0]
    name = str(tok)
    if name not in CATALOGUE:
        raise c.error(
            tok,
            f"unknown counter 'stats.{name}'",
            suggest(name, CATALOGUE, "a counter of the Asicmon catalogue"),
        )
    if ctx.reads:
        raise c.error(
            tok, "bindings cannot use stats counters", "bindings, constants and loop variables"
        )
    if name in RUNTIME_COUNTERS:
        raise c.error(
            tok,
            f"stats.{name} is set by the runtime after the probe and cannot be used in a spec",
            "another counter",
        )
    if name not in c.stats:
        raise c.error(
            tok,
            f"stats.{name} is used before it is assigned",
            f"an assignment to stats.{name} above this line",
        )
    sym = c.stats[name][0]
    return Val(sym.code, sym.vtype, sym.unit, sym.elem, stat_kind=CATALOGUE[name].kind)


def attr(c: Compilation, node: Tree, ctx: Ctx) -> Val:
    obj_node, attr = node.children
    obj = c.expr(obj_node, ctx)
    if obj.vtype not in ("any", "lib"):
        raise c.error(
            attr,
            f"{describe(obj.vtype)} has no attribute '{attr}'",
            "a value returned by a library call",
        )
    return Val(f"{obj.code}.{attr}", "any", ANY)


def subscript(c: Compilation, node: Tree, ctx: Ctx) -> Val:
    obj_node, index_node = node.children
    obj = c.expr(obj_node, ctx)
    idx = c.expr(index_node, ctx)
    if obj.vtype not in ("any", "list", "dict"):
        raise c.error(obj_node, f"cannot index {describe(obj.vtype)}", "a list")
    if idx.vtype not in ("any", "num", "str"):
        raise c.error(
            index_node, f"an index must be a number, not {describe(idx.vtype)}", "a number"
        )
    return Val(
        f"{obj.code}[{idx.code}]",
        obj.elem if obj.vtype == "list" else "any",
        obj.unit,
        stat_kind=obj.stat_kind,
    )


def list_(c: Compilation, node: Tree, ctx: Ctx) -> Val:
    items = [c.expr(child, ctx) for child in node.children if child is not None]
    unit = same_unit(c, node, items, "list items") if items else ANY
    elem = items[0].vtype if items and all(i.vtype == items[0].vtype for i in items) else "any"
    return Val("[" + ", ".join(i.code for i in items) + "]", "list", unit, elem)


def dict_(c: Compilation, node: Tree, ctx: Ctx) -> Val:
    pairs = []
    const = {}
    for pair in (child for child in node.children if child is not None):
        k, v = (c.expr(child, ctx) for child in pair.children)
        pairs.append(f"{k.code}: {v.code}")
        if k.const is not NO and v.const is not NO:
            const[k.const] = v.const
        else:
            const = None
    return Val("{" + ", ".join(pairs) + "}", "dict", ANY, const=const if const is not None else NO)


def comprehension(
    c: Compilation, node: Tree, elem_node: Tree, comp: Tree, ctx: Ctx
) -> tuple[Val, str, str]:
    var_tok, iter_node = comp.children
    it = c.expr(iter_node, ctx)
    check_iterable(c, iter_node, it)
    code = f"v_{var_tok}"
    with c.loop_var(var_tok, code):
        elem = c.expr(elem_node, Ctx(ctx.reads, ctx.once, [*ctx.loops, (code, it.code)]))
    if elem_node.data == "call" and out_count(elem_node):
        raise c.error(
            elem_node,
            "a call with out-parameters must be the whole right-hand side of a binding",
            "name, ... = [lib.f(..., out) for i in ...]",
        )
    return elem, f"for {code} in {it.code}", code


def listcomp(c: Compilation, node: Tree, ctx: Ctx) -> Val:
    elem_node, comp = node.children
    elem, loop, _ = comprehension(c, node, elem_node, comp, ctx)
    return Val(f"[{elem.code} {loop}]", "list", elem.unit, elem.vtype, is_rate=elem.is_rate)


def call_gen(c: Compilation, node: Tree, ctx: Ctx) -> Val:
    fn_node, elem_node, comp = node.children
    fn = plain_name(fn_node)
    if fn not in AGGREGATES:
        raise c.error(
            fn_node,
            f"{fn or 'this'} cannot take a generator",
            "one of " + ", ".join(AGGREGATES),
        )
    elem, loop, _ = comprehension(c, node, elem_node, comp, ctx)
    return aggregate(
        c,
        node,
        fn,
        Val(f"({elem.code} {loop})", "list", elem.unit, elem.vtype, is_rate=elem.is_rate),
    )


def call(c: Compilation, node: Tree, ctx: Ctx) -> Val:
    fn_node = node.children[0]
    args = call_args(node)
    if is_lib_call(node):
        if not ctx.reads:
            raise c.error(
                node,
                "library calls read the driver and belong in bindings",
                "name = lib.function(...) above, then use the name",
            )
        if any(isinstance(a, Tree) and a.data == "out_arg" for a in args):
            raise c.error(
                node,
                "a call with out-parameters must be the whole right-hand side of a binding",
                "name = lib.function(..., out)",
            )
        c.uses_lib = True
        codes = [c.expr(a, ctx).code for a in args]
        return Val(f"lib.{callee_name(node)}({', '.join(codes)})", "any", ANY)
    fn = plain_name(fn_node)
    if fn is None:
        raise c.error(
            fn_node,
            "only built-in functions and lib.<function> can be called",
            "one of " + ", ".join(BUILTINS),
        )
    for a in args:
        if isinstance(a, Tree) and a.data == "out_arg":
            raise c.error(a, "only library calls take out-parameters", "an expression")
    handler = BUILTINS.get(fn)
    if handler is None:
        if fn in c.scope:
            raise c.error(
                fn_node, f"'{fn}' is not a function", "a built-in function or lib.<function>"
            )
        raise c.error(
            fn_node,
            f"unknown function '{fn}'",
            suggest(fn, BUILTINS, "a built-in function or lib.<function>"),
        )
    positional = [a for a in args if not (isinstance(a, Tree) and a.data == "kwarg")]
    keywords = {
        str(a.children[0]): a.children[1] for a in args if isinstance(a, Tree) and a.data == "kwarg"
    }
    return handler(c, fn, node, positional, keywords, ctx)


def binary(c: Compilation, node: Tree, ctx: Ctx, op: str) -> Val:
    left, right = (c.expr(child, ctx) for child in node.children)
    if op == "+" and left.vtype == "str" and right.vtype == "str":
        const = left.const + right.const if left.const is not NO and right.const is not NO else NO
        return Val(f"({left.code} + {right.code})", "str", ANY, const=const)
    require_numbers(c, node, [left, right], op)
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
    code = repr(const) if const is not NO else f"({left.code} {op} {right.code})"
    return Val(code, "num", unit, is_rate=left.is_rate or right.is_rate, const=const)


def neg(c: Compilation, node: Tree, ctx: Ctx) -> Val:
    v = c.expr(node.children[0], ctx)
    require_numbers(c, node, [v], "-")
    const = -v.const if v.const is not NO else NO
    return Val(
        repr(const) if const is not NO else f"(-{v.code})",
        "num",
        v.unit,
        is_rate=v.is_rate,
        const=const,
    )


def compare(c: Compilation, node: Tree, ctx: Ctx) -> Val:
    left_node, op, right_node = node.children
    left, right = c.expr(left_node, ctx), c.expr(right_node, ctx)
    if {left.vtype, right.vtype} <= {"num", "bool", "any"}:
        same_unit(c, node, [left, right], f"the operands of '{op}'")
    return Val(f"({left.code} {op} {right.code})", "bool", None)


def not_(c: Compilation, node: Tree, ctx: Ctx) -> Val:
    v = c.expr(node.children[0], ctx)
    return Val(f"(not {v.code})", "bool", None)


def logic(c: Compilation, node: Tree, ctx: Ctx, op: str) -> Val:
    left, right = (c.expr(child, ctx) for child in node.children)
    vtype = left.vtype if left.vtype == right.vtype else "any"
    return Val(
        f"({left.code} {op} {right.code})", vtype, left.unit if left.unit == right.unit else ANY
    )


def ternary(c: Compilation, node: Tree, ctx: Ctx) -> Val:
    a_node, cond_node, b_node = node.children
    a, cond, b = c.expr(a_node, ctx), c.expr(cond_node, ctx), c.expr(b_node, ctx)
    if a.vtype in ("num", "any") and b.vtype in ("num", "any"):
        unit = same_unit(c, node, [a, b], "the two branches")
    else:
        unit = ANY
    vtype = (
        a.vtype
        if a.vtype == b.vtype
        else (
            "any"
            if "none" not in (a.vtype, b.vtype)
            else (b.vtype if a.vtype == "none" else a.vtype)
        )
    )
    literals = None
    if a.literals is not None and b.literals is not None:
        literals = a.literals + b.literals
    return Val(
        f"({a.code} if {cond.code} else {b.code})",
        vtype,
        unit,
        a.elem,
        a.is_rate or b.is_rate,
        literals,
    )


Expression = Callable[[Compilation, Tree, Ctx], Val]

EXPRESSIONS: dict[str, Expression] = {
    "number": number,
    "string": string,
    "true": true,
    "false": false,
    "none": none,
    "name": name,
    "stat": stat,
    "attr": attr,
    "subscript": subscript,
    "list_": list_,
    "dict_": dict_,
    "listcomp": listcomp,
    "call_gen": call_gen,
    "call": call,
    "neg": neg,
    "compare": compare,
    "not_": not_,
    "ternary": ternary,
    "and_": partial(logic, op="and"),
    "or_": partial(logic, op="or"),
    **{
        rule: partial(binary, op=op)
        for rule, op in (
            ("add", "+"),
            ("sub", "-"),
            ("mul", "*"),
            ("div", "/"),
            ("floordiv", "//"),
            ("mod", "%"),
            ("pow", "**"),
            ("bit_or", "|"),
            ("bit_and", "&"),
            ("lshift", "<<"),
            ("rshift", ">>"),
        )
    },
}
