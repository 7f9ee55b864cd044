"""The built-in functions of Asimov, in one registry: `BUILTINS` maps each name to the
function that checks a call of it (its code is written by `fleet.asimov.codegen`).

Every handler takes ``(c, fn, node, args, kwargs, ctx)``: the checker, the built-in's name,
the call node, its positional argument nodes, its keyword argument nodes by name, and where
the call is checked. It returns the call's `Value`; where code generation needs what the
check resolved, that is the value's ``ref``: a `FileRead` for ``file()``, the factor for
``convert()``, the modulus (or None) for ``rate()`` and ``delta()``, ``(names, none)`` for
``flags()``. Adding a built-in is one function and one line in `BUILTINS` here, and its
code in `fleet.asimov.codegen`.
"""

from __future__ import annotations

import re
import string
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from fleet.asimov.checking.checks import check_arity, check_relative_path, same_unit
from fleet.asimov.checking.units import Unit, UnitError, parse_unit
from fleet.asimov.checking.values import ANY, NO, Ctx, Symbol, Value, describe
from fleet.asimov.language.nodes import Call, Name, Node, String

if TYPE_CHECKING:
    from fleet.asimov.checking.interface import CheckerInterface

__all__ = ["AGGREGATES", "BUILTINS", "PARSERS", "FileParser", "FileRead", "aggregate"]

# file() parsers: Asimov name -> the Python function the generated code calls.
PARSERS = {"int": "int", "float": "float", "hex": "_rt.hex_int", "str": "_rt.text_value"}
AGGREGATES = ("max", "min", "sum", "mean", "len", "any", "all")
CONVERSIONS = {"int": "num", "float": "num", "str": "str", "bool": "bool"}


@dataclass(frozen=True)
class FileParser:
    """How ``file()`` turns the text it reads into a value."""

    kind: str  # plain | unit | regex | field | words
    convert: str = ""  # the parser each value goes through (a key of PARSERS)
    argument: str = ""  # the unit, the pattern, or the key


@dataclass(frozen=True)
class FileRead:
    """A checked ``file(path, parser)``: the path's text and fields, and the parser."""

    path: tuple[tuple[str, Symbol | None], ...]  # (literal text, the field after it or None)
    parser: FileParser


def aggregate(c: CheckerInterface, node: Node, fn: str, seq: Value) -> Value:
    if seq.vtype not in ("list", "any", "range"):
        raise c.error(
            node,
            f"{fn}() needs a list or a generator, not {describe(seq.vtype)}",
            f"{fn}(x for i in ...) or {fn}(a_list)",
        )
    if fn == "len":
        return Value("num", None)
    if fn in ("any", "all"):
        return Value("bool", None)
    return Value(
        "num" if seq.elem in ("any", "num", "bool") else seq.elem,
        seq.unit,
        is_rate=seq.is_rate,
    )


def file_call(c: CheckerInterface, fn: str, node: Call, args: list, kwargs: dict, ctx: Ctx) -> Value:
    check_arity(c, node, fn, args, kwargs, 2)
    if not ctx.reads:
        raise c.error(
            node,
            "file() reads the driver and belongs in bindings",
            "name = file(...) above, then use the name",
        )
    path_node, parser_node = args
    if not isinstance(path_node, String):
        raise c.error(
            path_node,
            "file() needs a path as a string",
            'a path such as "hwmon/temp1_input" or "core{c}/busy"',
        )
    check_relative_path(c, path_node, path_node.value, "file()'s path")
    path = path_template(c, path_node, ctx)
    c.uses_files = True
    parser, vtype, unit = file_parser(c, parser_node)
    return Value(vtype, unit, ref=FileRead(path, parser))


def path_template(c: CheckerInterface, node: String, ctx: Ctx) -> tuple[tuple[str, Symbol | None], ...]:
    """A path with ``{name}`` fields: (literal text, the symbol of the field after it)."""
    try:
        pieces = list(string.Formatter().parse(node.value))
    except ValueError as exc:
        raise c.error(
            node, f"bad path template: {exc}", 'a path with {name} fields, e.g. "core{c}/busy"'
        ) from None
    path = []
    for literal, field_name, _spec, _conv in pieces:
        symbol = None
        if field_name is not None:
            if not field_name.isidentifier():
                raise c.error(
                    node, f"bad path template field {{{field_name}}}", "a name between braces"
                )
            symbol = c.resolve(field_name, node, ctx)
        path.append((literal, symbol))
    return tuple(path)


def file_parser(c: CheckerInterface, node: Node) -> tuple[FileParser, str, Any]:
    """A file() parser: (the parser, value type, unit)."""
    expected = 'a parser: int, float, hex, str, unit("mW"), regex(r"...", int), field("key", int) or words("key", int)'
    if isinstance(node, Name) and node.id in PARSERS:
        return FileParser("plain", node.id), "str" if node.id == "str" else "num", ANY
    if isinstance(node, Call):
        fn, args = node.function_name, node.args
        first = args[0] if args else None
        if fn == "unit" and len(args) == 1 and isinstance(first, String):
            text = first.value
            try:
                unit = parse_unit(text)
            except UnitError as exc:
                raise c.error(first, str(exc), "a unit such as mW, W, MHz, mC") from None
            return FileParser("unit", argument=text), "num", unit
        if fn in ("regex", "field", "words") and len(args) == 2 and isinstance(first, String):
            pattern_node, conv_node = args
            pattern = pattern_node.value
            if not (isinstance(conv_node, Name) and conv_node.id in PARSERS):
                raise c.error(
                    conv_node,
                    f"{fn}() converts with int, float, hex or str",
                    "int, float, hex or str",
                )
            conv = conv_node.id
            vtype = "str" if conv == "str" else "num"
            if fn == "field":
                return FileParser("field", conv, pattern), vtype, ANY
            if fn == "words":
                return FileParser("words", conv, pattern), "list", ANY
            try:
                compiled = re.compile(pattern)
            except re.error as exc:
                raise c.error(
                    pattern_node, f"bad regular expression: {exc}", "a valid regular expression"
                ) from None
            if compiled.groups != 1:
                raise c.error(
                    pattern_node,
                    f"the regular expression has {compiled.groups} groups",
                    "exactly one (group) around the value",
                )
            return FileParser("regex", conv, pattern), vtype, ANY
    raise c.error(node, "unknown parser", expected)


def optional_call(c: CheckerInterface, fn: str, node: Call, args: list, kwargs: dict, ctx: Ctx) -> Value:
    raise c.error(
        node,
        "optional() must be the whole right-hand side of a binding",
        "name = optional(<a read>)",
    )


def rate_or_delta(c: CheckerInterface, fn: str, node: Call, args: list, kwargs: dict, ctx: Ctx) -> Value:
    check_arity(c, node, fn, args, kwargs, 1, 1, ("wrap",))
    if ctx.once:
        raise c.error(
            node,
            f"{fn}() compares two refreshes and cannot be used in a once statement",
            "a per-refresh binding or counter",
        )
    (counter,) = args
    val = c.expr(counter, ctx)
    if val.stat_kind is not None and val.stat_kind != "counter":
        raise c.error(
            counter,
            f"{fn}() needs a monotonic counter, but this is a {val.stat_kind}",
            "a counter: a binding read from the driver or a stats counter of kind counter",
        )
    if val.vtype not in ("num", "any"):
        raise c.error(
            counter, f"{fn}() needs a number, not {describe(val.vtype)}", "a monotonic counter"
        )
    wrap = None
    if "wrap" in kwargs:
        w = c.expr(kwargs["wrap"], ctx)
        if not isinstance(w.const, int) or w.const <= 0:
            raise c.error(
                kwargs["wrap"],
                "wrap must be a positive integer constant",
                "the counter's modulus, e.g. 2**32",
            )
        wrap = w.const
    unit = val.unit
    if fn == "rate" and unit is not ANY:
        unit = (unit or Unit((), 1.0)) / parse_unit("s")
        unit = Unit(unit.dims, unit.scale)
    return Value("num", unit, is_rate=True, ref=wrap)


def convert_call(c: CheckerInterface, fn: str, node: Call, args: list, kwargs: dict, ctx: Ctx) -> Value:
    check_arity(c, node, fn, args, kwargs, 2)
    value_node, unit_node = args
    val = c.expr(value_node, ctx)
    if not isinstance(unit_node, String):
        raise c.error(
            unit_node, "convert() needs the target unit as a string", 'a unit such as "W"'
        )
    try:
        target = parse_unit(unit_node.value)
    except UnitError as exc:
        raise c.error(unit_node, str(exc), "a unit such as W, C, MHz, B") from None
    if val.unit is ANY or val.unit is None:
        raise c.error(
            value_node,
            "convert() needs a value with a known unit",
            "a binding annotated with its unit, e.g. power: mW = ...",
        )
    if not val.unit.same_dimension(target):
        raise c.error(
            unit_node,
            f"cannot convert {val.unit} to {target}",
            f"a unit of the same dimension as {val.unit}",
        )
    factor = val.unit.factor_to(target)
    return Value(val.vtype, target, val.elem, is_rate=val.is_rate, ref=factor)


def flags_call(c: CheckerInterface, fn: str, node: Call, args: list, kwargs: dict, ctx: Ctx) -> Value:
    check_arity(c, node, fn, args, kwargs, 2, 3)
    mask_node, names_node, *none_node = args
    c.expr(mask_node, ctx)
    names = c.expr(names_node, ctx)
    if (
        names.vtype != "dict"
        or names.const is NO
        or not all(isinstance(k, int) and isinstance(v, str) for k, v in names.const.items())
    ):
        raise c.error(
            names_node,
            "flags() needs a constant {bit: name} dictionary",
            '{0x1: "thermal", 0x2: "power"}',
        )
    none = "none"
    for where in none_node:
        n = c.expr(where, ctx)
        if not isinstance(n.const, str):
            raise c.error(where, "the name for no flags must be a string", '"none"')
        none = n.const
    return Value("str", ANY, ref=(names.const, none))


def clamp_call(c: CheckerInterface, fn: str, node: Call, args: list, kwargs: dict, ctx: Ctx) -> Value:
    check_arity(c, node, fn, args, kwargs, 3)
    vals = [c.expr(a, ctx) for a in args]
    unit = same_unit(c, node, vals, "clamp() arguments")
    return Value("num", unit, is_rate=vals[0].is_rate)


def range_call(c: CheckerInterface, fn: str, node: Call, args: list, kwargs: dict, ctx: Ctx) -> Value:
    check_arity(c, node, fn, args, kwargs, 1, 2)
    for a in args:
        c.expr(a, ctx)
    return Value("range", None, "num")


def min_or_max(c: CheckerInterface, fn: str, node: Call, args: list, kwargs: dict, ctx: Ctx) -> Value:
    check_arity(c, node, fn, args, kwargs, 1, 16)
    vals = [c.expr(a, ctx) for a in args]
    if len(vals) == 1:
        return aggregate(c, node, fn, vals[0])
    unit = same_unit(c, node, vals, f"{fn}() arguments")
    return Value("num", unit, is_rate=any(v.is_rate for v in vals))


def over_sequence(c: CheckerInterface, fn: str, node: Call, args: list, kwargs: dict, ctx: Ctx) -> Value:
    check_arity(c, node, fn, args, kwargs, 1)
    (sequence,) = args
    return aggregate(c, node, fn, c.expr(sequence, ctx))


def abs_call(c: CheckerInterface, fn: str, node: Call, args: list, kwargs: dict, ctx: Ctx) -> Value:
    check_arity(c, node, fn, args, kwargs, 1)
    (arg,) = args
    v = c.expr(arg, ctx)
    return Value("num", v.unit, is_rate=v.is_rate)


def round_call(c: CheckerInterface, fn: str, node: Call, args: list, kwargs: dict, ctx: Ctx) -> Value:
    check_arity(c, node, fn, args, kwargs, 1, 2)
    vals = [c.expr(a, ctx) for a in args]
    return Value("num", vals[0].unit, is_rate=vals[0].is_rate)


def conversion(c: CheckerInterface, fn: str, node: Call, args: list, kwargs: dict, ctx: Ctx) -> Value:
    vtype = CONVERSIONS[fn]
    check_arity(c, node, fn, args, kwargs, 1)
    (arg,) = args
    v = c.expr(arg, ctx)
    unit = v.unit if vtype == "num" else ANY
    literals = (str(v.const),) if vtype == "str" and v.const is not NO else None
    return Value(vtype, unit, is_rate=v.is_rate and vtype == "num", literals=literals)


Handler = Callable[["CheckerInterface", str, Call, list, dict, Ctx], Value]

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
