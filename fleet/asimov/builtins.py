"""The built-in functions of Asimov, in one registry: `BUILTINS` maps each name to the
function that checks a call of it and compiles it to Python.

Every handler takes ``(c, fn, node, args, kwargs, ctx)``: the compilation, the built-in's
name, the call node, its positional argument nodes, its keyword argument nodes by name, and
where the call is compiled. Adding a built-in is one function and one line in `BUILTINS`.
"""

from __future__ import annotations

import re
import string
from collections.abc import Callable
from typing import Any

from lark import Token, Tree

from fleet.asimov.checks import check_arity, same_unit
from fleet.asimov.codegen import guarded
from fleet.asimov.state import Compilation
from fleet.asimov.tree import call_args, plain_name, string_value
from fleet.asimov.units import Unit, UnitError, parse_unit
from fleet.asimov.values import ANY, NO, Ctx, Val, describe

__all__ = ["AGGREGATES", "BUILTINS", "PARSERS", "aggregate"]

# file() parsers: Asimov name -> the Python function the generated code calls.
PARSERS = {"int": "int", "float": "float", "hex": "_rt.hex_int", "str": "_rt.text_value"}
AGGREGATES = ("max", "min", "sum", "mean", "len", "any", "all")
CONVERSIONS = {"int": "num", "float": "num", "str": "str", "bool": "bool"}


def aggregate(c: Compilation, node: Tree, fn: str, seq: Val) -> Val:
    if seq.vtype not in ("list", "any", "range"):
        raise c.error(
            node,
            f"{fn}() needs a list or a generator, not {describe(seq.vtype)}",
            f"{fn}(x for i in ...) or {fn}(a_list)",
        )
    py = {"mean": "_rt.mean"}.get(fn, fn)
    if fn == "len":
        return Val(f"len({seq.code})", "num", None)
    if fn in ("any", "all"):
        return Val(f"{fn}({seq.code})", "bool", None)
    return Val(
        f"{py}({seq.code})",
        "num" if seq.elem in ("any", "num", "bool") else seq.elem,
        seq.unit,
        is_rate=seq.is_rate,
    )


def file_call(c: Compilation, fn: str, node: Tree, args: list, kwargs: dict, ctx: Ctx) -> Val:
    check_arity(c, node, fn, args, kwargs, 2)
    if not ctx.reads:
        raise c.error(
            node,
            "file() reads the driver and belongs in bindings",
            "name = file(...) above, then use the name",
        )
    path_node, parser_node = args
    if path_node.data != "string":
        raise c.error(
            path_node,
            "file() needs a path as a string",
            'a path such as "hwmon/temp1_input" or "core{c}/busy"',
        )
    path = path_template(c, path_node, string_value(path_node.children[0]), ctx)
    c.uses_files = True
    convert, vtype, unit = file_parser(c, parser_node)
    return Val(convert.replace("TEXT", f"read({path})"), vtype, unit)


def path_template(c: Compilation, node: Tree, text: str, ctx: Ctx) -> str:
    parts, names = [], []
    try:
        pieces = list(string.Formatter().parse(text))
    except ValueError as exc:
        raise c.error(
            node, f"bad path template: {exc}", 'a path with {name} fields, e.g. "core{c}/busy"'
        ) from None
    for literal, field_name, _spec, _conv in pieces:
        parts.append(literal.replace("%", "%%"))
        if field_name is not None:
            if not field_name.isidentifier():
                raise c.error(
                    node, f"bad path template field {{{field_name}}}", "a name between braces"
                )
            val = c.expr(
                Tree(
                    "name",
                    [Token("NAME", field_name, line=node.meta.line, column=node.meta.column)],
                ),
                ctx,
            )
            parts.append("%s")
            names.append(val.code)
    fmt = "".join(parts)
    if not names:
        return repr(fmt.replace("%%", "%"))
    return f"{fmt!r} % ({', '.join(names)},)"


def file_parser(c: Compilation, node: Tree) -> tuple[str, str, Any]:
    """A file() parser: (code with TEXT placeholder, value type, unit)."""
    expected = 'a parser: int, float, hex, str, unit("mW"), regex(r"...", int), field("key", int) or words("key", int)'
    if node.data == "name" and str(node.children[0]) in PARSERS:
        name = str(node.children[0])
        return f"{PARSERS[name]}(TEXT)", "str" if name == "str" else "num", ANY
    if node.data == "call":
        fn = plain_name(node.children[0])
        args = call_args(node)
        if fn == "unit" and len(args) == 1 and args[0].data == "string":
            text = string_value(args[0].children[0])
            try:
                unit = parse_unit(text)
            except UnitError as exc:
                raise c.error(args[0], str(exc), "a unit such as mW, W, MHz, mC") from None
            return f"_rt.parse_unit(TEXT, {text!r})", "num", unit
        if fn in ("regex", "field", "words") and len(args) == 2 and args[0].data == "string":
            pattern = string_value(args[0].children[0])
            conv_node = args[1]
            if conv_node.data != "name" or str(conv_node.children[0]) not in PARSERS:
                raise c.error(
                    conv_node,
                    f"{fn}() converts with int, float, hex or str",
                    "int, float, hex or str",
                )
            conv = str(conv_node.children[0])
            vtype = "str" if conv == "str" else "num"
            if fn == "field":
                return f"_rt.field(TEXT, {pattern!r}, {PARSERS[conv]})", vtype, ANY
            if fn == "words":
                return f"_rt.words(TEXT, {pattern!r}, {PARSERS[conv]})", "list", ANY
            try:
                compiled = re.compile(pattern)
            except re.error as exc:
                raise c.error(
                    args[0], f"bad regular expression: {exc}", "a valid regular expression"
                ) from None
            if compiled.groups != 1:
                raise c.error(
                    args[0],
                    f"the regular expression has {compiled.groups} groups",
                    "exactly one (group) around the value",
                )
            const = c.module_const(f"re.compile({pattern!r})")
            return f"_rt.regex_field({const}, TEXT, {PARSERS[conv]})", vtype, ANY
    raise c.error(node, "unknown parser", expected)


def optional_call(c: Compilation, fn: str, node: Tree, args: list, kwargs: dict, ctx: Ctx) -> Val:
    raise c.error(
        node,
        "optional() must be the whole right-hand side of a binding",
        "name = optional(<a read>)",
    )


def rate_or_delta(c: Compilation, fn: str, node: Tree, args: list, kwargs: dict, ctx: Ctx) -> Val:
    check_arity(c, node, fn, args, kwargs, 1, 1, ("wrap",))
    if ctx.once:
        raise c.error(
            node,
            f"{fn}() compares two refreshes and cannot be used in a once statement",
            "a per-refresh binding or counter",
        )
    val = c.expr(args[0], ctx)
    if val.stat_kind is not None and val.stat_kind != "counter":
        raise c.error(
            args[0],
            f"{fn}() needs a monotonic counter, but this is a {val.stat_kind}",
            "a counter: a binding read from the driver or a stats counter of kind counter",
        )
    if val.vtype not in ("num", "any"):
        raise c.error(
            args[0], f"{fn}() needs a number, not {describe(val.vtype)}", "a monotonic counter"
        )
    wrap = "None"
    if "wrap" in kwargs:
        w = c.expr(kwargs["wrap"], ctx)
        if not isinstance(w.const, int) or w.const <= 0:
            raise c.error(
                kwargs["wrap"],
                "wrap must be a positive integer constant",
                "the counter's modulus, e.g. 2**32",
            )
        wrap = repr(w.const)
    c.slot += 1
    method = "_rate" if fn == "rate" else "_delta"
    # Hoisted out of the counter's expression so that the previous value of every
    # counter (every core's, in a loop) is updated on every refresh, even when the
    # expression around it fails.
    var = f"_r{c.slot}"
    if not ctx.loops:
        call = f"self.{method}({c.slot}, {val.code}, now, {wrap})"
        code = var
    else:
        names = ", ".join(v for v, _ in ctx.loops)
        key = f"({c.slot}, {names})"
        loops = " ".join(f"for {v} in {it}" for v, it in ctx.loops)
        call = f"{{{names if len(ctx.loops) == 1 else '(' + names + ')'}: self.{method}({key}, {val.code}, now, {wrap}) {loops}}}"
        code = f"{var}[{names if len(ctx.loops) == 1 else '(' + names + ')'}]"
    c.hoisted += guarded(var, call, always=True)
    unit = val.unit
    if fn == "rate" and unit is not ANY:
        unit = (unit or Unit((), 1.0)) / parse_unit("s")
        unit = Unit(unit.dims, unit.scale)
    return Val(code, "num", unit, is_rate=True)


def convert_call(c: Compilation, fn: str, node: Tree, args: list, kwargs: dict, ctx: Ctx) -> Val:
    check_arity(c, node, fn, args, kwargs, 2)
    val = c.expr(args[0], ctx)
    if args[1].data != "string":
        raise c.error(args[1], "convert() needs the target unit as a string", 'a unit such as "W"')
    try:
        target = parse_unit(string_value(args[1].children[0]))
    except UnitError as exc:
        raise c.error(args[1], str(exc), "a unit such as W, C, MHz, B") from None
    if val.unit is ANY or val.unit is None:
        raise c.error(
            args[0],
            "convert() needs a value with a known unit",
            "a binding annotated with its unit, e.g. power: mW = ...",
        )
    if not val.unit.same_dimension(target):
        raise c.error(
            args[1],
            f"cannot convert {val.unit} to {target}",
            f"a unit of the same dimension as {val.unit}",
        )
    factor = val.unit.factor_to(target)
    code = val.code if factor == 1 else f"({val.code}) * {factor!r}"
    return Val(code, val.vtype, target, val.elem, is_rate=val.is_rate)


def flags_call(c: Compilation, fn: str, node: Tree, args: list, kwargs: dict, ctx: Ctx) -> Val:
    check_arity(c, node, fn, args, kwargs, 2, 3)
    mask = c.expr(args[0], ctx)
    names = c.expr(args[1], ctx)
    if (
        names.vtype != "dict"
        or names.const is NO
        or not all(isinstance(k, int) and isinstance(v, str) for k, v in names.const.items())
    ):
        raise c.error(
            args[1],
            "flags() needs a constant {bit: name} dictionary",
            '{0x1: "thermal", 0x2: "power"}',
        )
    none = repr("none")
    literals = None
    if len(args) == 3:
        n = c.expr(args[2], ctx)
        if not isinstance(n.const, str):
            raise c.error(args[2], "the name for no flags must be a string", '"none"')
        none = repr(n.const)
    const = c.module_const(repr(names.const))
    return Val(f"_rt.flags({mask.code}, {const}, {none})", "str", ANY, literals=literals)


def clamp_call(c: Compilation, fn: str, node: Tree, args: list, kwargs: dict, ctx: Ctx) -> Val:
    check_arity(c, node, fn, args, kwargs, 3)
    vals = [c.expr(a, ctx) for a in args]
    unit = same_unit(c, node, vals, "clamp() arguments")
    return Val(
        f"_rt.clamp({', '.join(v.code for v in vals)})", "num", unit, is_rate=vals[0].is_rate
    )


def range_call(c: Compilation, fn: str, node: Tree, args: list, kwargs: dict, ctx: Ctx) -> Val:
    check_arity(c, node, fn, args, kwargs, 1, 2)
    vals = [c.expr(a, ctx) for a in args]
    return Val(f"range({', '.join(v.code for v in vals)})", "range", None, "num")


def min_or_max(c: Compilation, fn: str, node: Tree, args: list, kwargs: dict, ctx: Ctx) -> Val:
    check_arity(c, node, fn, args, kwargs, 1, 16)
    vals = [c.expr(a, ctx) for a in args]
    if len(vals) == 1:
        return aggregate(c, node, fn, vals[0])
    unit = same_unit(c, node, vals, f"{fn}() arguments")
    return Val(
        f"{fn}({', '.join(v.code for v in vals)})",
        "num",
        unit,
        is_rate=any(v.is_rate for v in vals),
    )


def over_sequence(c: Compilation, fn: str, node: Tree, args: list, kwargs: dict, ctx: Ctx) -> Val:
    check_arity(c, node, fn, args, kwargs, 1)
    return aggregate(c, node, fn, c.expr(args[0], ctx))


def abs_call(c: Compilation, fn: str, node: Tree, args: list, kwargs: dict, ctx: Ctx) -> Val:
    check_arity(c, node, fn, args, kwargs, 1)
    v = c.expr(args[0], ctx)
    return Val(f"abs({v.code})", "num", v.unit, is_rate=v.is_rate)


def round_call(c: Compilation, fn: str, node: Tree, args: list, kwargs: dict, ctx: Ctx) -> Val:
    check_arity(c, node, fn, args, kwargs, 1, 2)
    vals = [c.expr(a, ctx) for a in args]
    return Val(
        f"round({', '.join(v.code for v in vals)})",
        "num",
        vals[0].unit,
        is_rate=vals[0].is_rate,
    )


def conversion(c: Compilation, fn: str, node: Tree, args: list, kwargs: dict, ctx: Ctx) -> Val:
    vtype = CONVERSIONS[fn]
    check_arity(c, node, fn, args, kwargs, 1)
    v = c.expr(args[0], ctx)
    unit = v.unit if vtype == "num" else ANY
    literals = (str(v.const),) if vtype == "str" and v.const is not NO else None
    return Val(
        f"{fn}({v.code})", vtype, unit, is_rate=v.is_rate and vtype == "num", literals=literals
    )


Handler = Callable[[Compilation, str, Tree, list, dict, Ctx], Val]

BUILTINS: dict[str, Handler] = {
    "abs": abs_call,
    "all": over_sequence,
    "any": over_sequence,
    "bool": conversion,
    "clamp": clamp_call,
    "convert": convert_call,
    "delta": rate_or_delta,
    "file": file_call,
    "flags": flags_call,
    "float": conversion,
    "int": conversion,
    "len": over_sequence,
    "max": min_or_max,
    "mean": over_sequence,
    "min": min_or_max,
    "optional": optional_call,
    "range": range_call,
    "rate": rate_or_delta,
    "round": round_call,
    "str": conversion,
    "sum": over_sequence,
}
