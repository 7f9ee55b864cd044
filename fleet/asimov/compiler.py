"""The Asimov compiler: checks a spec against the Asicmon catalogue and emits a Python
monitor module (a `fleet.asimov.runtime.DeviceMonitor` subclass).

A spec has four kinds of statement:

* ``const NAME = 42`` -- a constant;
* ``error CODE means "hung"`` -- how a driver error code maps to a driver status;
* bindings -- ``name = file("path", int)`` or ``a, b = lib.fn(handle, out, out)``: driver
  reads, evaluated every refresh, or once when prefixed by ``once``;
* ``stats.counter = expression`` -- catalogue counters, from bindings and other counters.

The checks: every name is defined above its use, every counter is in the catalogue and is
assigned once, values have the counter's kind and unit, every read is used.
"""

from __future__ import annotations

import contextlib
import difflib
import re
import string
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lark import Token, Tree

from fleet.asicmon.catalogue import CATALOGUE, DRIVER_STATUSES, RUNTIME_COUNTERS
from fleet.asimov.errors import AsimovError, SpecErrors
from fleet.asimov.parser import parse
from fleet.asimov.units import Unit, UnitError, parse_unit

__all__ = ["CompiledSpec", "check_spec", "compile_file", "compile_spec"]

ANY = "any"  # unit not known: not checked
_NO = object()  # no compile-time value

PARSERS = {"int": "int", "float": "float", "hex": "_rt.hex_int", "str": "_rt.text_value"}
AGGREGATES = ("max", "min", "sum", "mean", "len", "any", "all")
BUILTINS = (
    "abs",
    "all",
    "any",
    "bool",
    "clamp",
    "convert",
    "delta",
    "file",
    "flags",
    "float",
    "int",
    "len",
    "max",
    "mean",
    "min",
    "optional",
    "range",
    "rate",
    "round",
    "str",
    "sum",
)
SPECIAL_NAMES = {"index": ("num", None), "lib": ("lib", ANY), "now": ("num", None)}
VALUE_ERRORS = "(TypeError, ValueError, ZeroDivisionError, ArithmeticError, IndexError, KeyError, AttributeError)"


@dataclass
class Val:
    """A compiled expression: its Python code and what the checker knows about it."""

    code: str
    vtype: str = "any"  # num | str | bool | list | dict | range | lib | none | any
    unit: Any = ANY  # a Unit, None for a plain number, or ANY
    elem: str = "any"  # element type of lists
    is_rate: bool = False
    literals: tuple[str, ...] | None = None  # the string values it can take, if known
    const: Any = _NO
    stat_kind: str | None = None  # kind of the stats counter it reads directly


@dataclass
class Symbol:
    name: str
    kind: str  # const | binding | once | loop | special
    code: str
    vtype: str = "any"
    unit: Any = ANY
    elem: str = "any"
    meta: Any = None
    used: bool = False
    value: Any = _NO


@dataclass
class CompiledSpec:
    device: str
    source: str
    code: str
    counters: tuple[str, ...]
    error_status: dict[int, str]


@dataclass
class _Ctx:
    """Where an expression is compiled: in a binding (reads allowed), once, in a loop."""

    reads: bool = False
    once: bool = False
    loops: list[tuple[str, str]] = field(default_factory=list)  # (loop variable, iterable) codes


class _Abort(Exception):
    """Stops compiling one statement after its error was recorded."""


class Compiler:
    def __init__(self, text: str, filename: str) -> None:
        self.text = text
        self.filename = filename
        self.lines = text.splitlines()
        self.errors: list[AsimovError] = []
        self.scope: dict[str, Symbol] = {}
        self.stats: dict[str, tuple[Symbol, Any]] = {}  # counter -> (symbol, meta of assignment)
        self.device = Path(filename).stem
        self.error_status: dict[int, str] = {}
        self.module_consts: list[str] = []
        self.open_lines: list[str] = []
        self.probe_lines: list[str] = []
        self.slot = 0
        self.tmp = 0
        self.uses_files = False
        self.uses_lib = False
        self.hoisted: list[str] = []
        for name, (vtype, unit) in SPECIAL_NAMES.items():
            self.scope[name] = Symbol(name, "special", name, vtype, unit, used=True)

    # -- errors ---------------------------------------------------------------------------
    def error(self, where: Any, message: str, expected: str = "") -> _Abort:
        line, column = _position(where)
        source = self.lines[line - 1] if 0 < line <= len(self.lines) else ""
        self.errors.append(AsimovError(message, self.filename, line, column, source, expected))
        return _Abort()

    # -- driver ---------------------------------------------------------------------------
    def run(self) -> CompiledSpec:
        tree = parse(self.text, self.filename)
        for i, stmt in enumerate(tree.children):
            with contextlib.suppress(_Abort):
                self.statement(stmt, first=i == 0)
        for sym in (
            self.scope.values() if not self.errors else ()
        ):  # unused reads: only in a spec otherwise fine
            if sym.kind in ("binding", "once") and not sym.used and not sym.name.startswith("_"):
                self.error(
                    sym.meta,
                    f"'{sym.name}' is read from the driver but never used",
                    "a use in a stats counter or another binding (or remove the read)",
                )
        if self.errors:
            raise SpecErrors(self.errors)
        return CompiledSpec(
            self.device, self.filename, self.emit(), tuple(self.stats), dict(self.error_status)
        )

    def statement(self, stmt: Tree, first: bool) -> None:
        kind = stmt.data
        if kind == "device_stmt":
            if not first:
                raise self.error(
                    stmt,
                    "'device' must be the first statement",
                    "the device statement on the first line",
                )
            self.device = str(stmt.children[0])
        elif kind == "const_stmt":
            self.const(stmt)
        elif kind == "error_stmt":
            self.error_stmt(stmt)
        elif kind == "once_stmt":
            inner = stmt.children[0]
            if inner.data == "assign_stmt":
                self.binding(inner, once=True)
            else:
                self.expr_stmt(inner, once=True)
        elif kind == "assign_stmt":
            self.binding(stmt, once=False)
        elif kind == "stats_stmt":
            self.stats_stmt(stmt)
        elif kind == "expr_stmt":
            self.expr_stmt(stmt, once=False)

    # -- statements -------------------------------------------------------------------------
    def define(self, name_tok: Token, sym: Symbol) -> None:
        name = str(name_tok)
        old = self.scope.get(name)
        if name in BUILTINS or name in PARSERS:
            raise self.error(
                name_tok, f"'{name}' is a built-in function and cannot be redefined", "another name"
            )
        if old is not None and name != "_":
            where = f" (line {old.meta.line})" if old.meta is not None else ""
            raise self.error(name_tok, f"'{name}' is already defined{where}", "a new name")
        sym.meta = name_tok
        self.scope[name] = sym

    def const(self, stmt: Tree) -> None:
        name, value_node = stmt.children
        val = self.expr(value_node, _Ctx())
        if val.const is _NO:
            raise self.error(
                value_node,
                "a constant needs a value known when compiling",
                "numbers, strings and arithmetic on them",
            )
        unit = None if isinstance(val.const, (int, float)) else ANY
        vtype = "str" if isinstance(val.const, str) else "num"
        self.define(
            name,
            Symbol(str(name), "const", repr(val.const), vtype, unit, value=val.const, used=True),
        )

    def error_stmt(self, stmt: Tree) -> None:
        code_node, status_tok = stmt.children
        val = self.expr(code_node, _Ctx())
        if not isinstance(val.const, int):
            raise self.error(
                code_node, "an error code must be an integer constant", "a number or a const name"
            )
        status = _string_value(status_tok)
        allowed = [s for s in DRIVER_STATUSES if s != "ok"]
        if status not in allowed:
            raise self.error(
                status_tok,
                f"unknown driver status {status!r}",
                "one of " + ", ".join(repr(s) for s in allowed),
            )
        self.error_status[val.const] = status

    def expr_stmt(self, stmt: Tree, once: bool) -> None:
        node = stmt.children[0]
        if not _is_lib_call(node):
            raise self.error(
                node,
                "a statement on its own must be a library call",
                "a library call such as lib.init()",
            )
        ctx = _Ctx(reads=True, once=once)
        lines = self.open_lines if once else self.probe_lines
        if _out_count(node):
            stmts, _ = self.out_call(node, ctx)
            lines.extend(stmts)
        else:
            lines.append(self.expr(node, ctx).code)

    def binding(self, stmt: Tree, once: bool) -> None:
        targets_node, annotation, value = stmt.children
        names = list(targets_node.children)
        unit = ANY
        if annotation is not None:
            unit_tok = annotation.children[0]
            text = _string_value(unit_tok) if unit_tok.type == "STRING" else str(unit_tok)
            try:
                unit = parse_unit(text)
            except UnitError as exc:
                raise self.error(
                    unit_tok, str(exc), "a unit such as W, mW, C, mC, MHz, B, KiB, count, us"
                ) from None
        ctx = _Ctx(reads=True, once=once)
        lines = self.open_lines if once else self.probe_lines
        prefix = "o_" if once else "b_"
        codes = [f"{prefix}{n}" if str(n) != "_" else "_" for n in names]
        try:
            stmts, val = self.source(value, ctx, codes, str(names[0]))
        except _Abort:
            for name in names:  # defined anyway, so that later uses do not cascade into errors
                if str(name) not in self.scope:
                    self.scope[str(name)] = Symbol(
                        str(name), "binding", "None", meta=name, used=True
                    )
            raise
        lines.extend(self.hoisted)
        self.hoisted = []
        if (
            val.unit is not ANY
            and val.unit is not None
            and unit is not ANY
            and not val.unit.same(unit)
        ):
            raise self.error(
                annotation,
                f"the annotation says {unit} but the value is in {val.unit}",
                f"the unit {val.unit} (or no annotation)",
            )
        if unit is ANY:
            unit = val.unit
        lines.extend(stmts)
        for name, code in zip(names, codes, strict=True):
            if once and code != "_":
                lines.append(f"self._{code} = {code}")
            kind = "once" if once else "binding"
            vtype = val.vtype if len(names) == 1 else "any"
            self.define(
                name,
                Symbol(
                    str(name),
                    kind,
                    code,
                    vtype,
                    unit if len(names) == 1 or unit is not ANY else ANY,
                    val.elem,
                ),
            )

    def source(
        self, node: Tree, ctx: _Ctx, targets: list[str], label: str
    ) -> tuple[list[str], Val]:
        """Statements that read a binding's value into ``targets``."""
        if _is_call_named(node, "optional"):
            args = _call_args(node)
            if len(args) != 1:
                raise self.error(node, "optional() takes one read", "optional(<a read>)")
            inner, val = self.source(args[0], ctx, targets, label)
            body = ["try:"] + ["    " + s for s in inner]
            body += [
                "except Exception as _exc:",
                "    if self.classify(_exc) != 'error':",
                "        raise",
            ]
            body += [f"    {t} = None" for t in targets]
            return body, val
        outs = _out_count(node) if node.data == "call" else 0
        if (
            node.data == "listcomp"
            and node.children[0].data == "call"
            and _out_count(node.children[0])
        ):
            return self.out_call_loop(node, ctx, targets)
        if outs:
            stmts, results = self.out_call(node, ctx)
            if len(results) != len(targets):
                raise self.error(
                    node,
                    f"{_callee_name(node)}() fills {len(results)} out-parameter{'s' * (len(results) != 1)} but {len(targets)} name{'s' * (len(targets) != 1)} {'are' if len(targets) != 1 else 'is'} assigned",
                    f"{len(results)} name{'s' * (len(results) != 1)} on the left",
                )
            stmts += [f"{t} = {r}" for t, r in zip(targets, results, strict=True)]
            return stmts, Val("", "any", ANY)
        if len(targets) != 1:
            raise self.error(
                node,
                "only a call with out-parameters can fill several names",
                "one name on the left",
            )
        val = self.expr(node, ctx)
        return [f"{targets[0]} = {val.code}"], val

    def out_call(self, node: Tree, ctx: _Ctx) -> tuple[list[str], list[str]]:
        """A C-style call: returns a status, fills out-parameters. Statements + out values."""
        fn = _callee_name(node)
        if not _is_lib_call(node):
            raise self.error(
                node, "only library functions take out-parameters", "lib.<function>(..., out)"
            )
        self.uses_lib = True
        args, outs = [], []
        for arg in _call_args(node):
            if isinstance(arg, Tree) and arg.data == "out_arg":
                self.tmp += 1
                outs.append(f"_o{self.tmp}")
                args.append(outs[-1])
            elif isinstance(arg, Tree) and arg.data == "kwarg":
                raise self.error(
                    arg, "library calls take positional arguments only", "an expression or out"
                )
            else:
                args.append(self.expr(arg, ctx).code)
        stmts = [f"{o} = _Out()" for o in outs]
        stmts.append(f"_st = lib.{fn}({', '.join(args)})")
        stmts.append(f"if _st != 0: raise _rt.DriverStatusError(_st, {fn!r})")
        return stmts, [f"{o}.value" for o in outs]

    def out_call_loop(self, node: Tree, ctx: _Ctx, targets: list[str]) -> tuple[list[str], Val]:
        elem, comp = node.children
        var_tok, iter_node = comp.children
        it = self.expr(iter_node, ctx)
        self.check_iterable(iter_node, it)
        loop_code = f"v_{var_tok}"
        with self.loop_var(var_tok, loop_code):
            inner = _Ctx(ctx.reads, ctx.once, [*ctx.loops, (loop_code, it.code)])
            stmts, results = self.out_call(elem, inner)
        if len(results) != len(targets):
            raise self.error(
                node,
                f"{_callee_name(elem)}() fills {len(results)} out-parameters but {len(targets)} names are assigned",
                f"{len(results)} names on the left",
            )
        lines = [f"{t} = []" for t in targets]
        lines.append(f"for {loop_code} in {it.code}:")
        lines += ["    " + s for s in stmts]
        lines += [f"    {t}.append({r})" for t, r in zip(targets, results, strict=True)]
        return lines, Val("", "list", ANY)

    def stats_stmt(self, stmt: Tree) -> None:
        name_tok, value = stmt.children
        name = str(name_tok)
        counter = CATALOGUE.get(name)
        if counter is None:
            raise self.error(
                name_tok,
                f"unknown counter 'stats.{name}'",
                _suggest(name, CATALOGUE, "a counter of the Asicmon catalogue"),
            )
        if name in RUNTIME_COUNTERS:
            raise self.error(
                name_tok,
                f"stats.{name} is set by the monitor runtime, not by specs",
                "another counter",
            )
        if name in self.stats:
            first = self.stats[name][1]
            raise self.error(
                name_tok,
                f"stats.{name} is assigned twice (first on line {first.line})",
                "one assignment per counter",
            )
        val = self.expr(value, _Ctx())
        self.check_counter(counter, val, value)
        code = f"s_{name}"
        self.probe_lines += self.hoisted
        self.hoisted = []
        if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*|'[^'\\]*'|-?[0-9.e+-]+", val.code):
            self.probe_lines.append(f"{code} = {val.code}")  # cannot fail
        else:
            self.probe_lines += [
                "try:",
                f"    {code} = {val.code}",
                f"except {VALUE_ERRORS}:",
                f"    {code} = None",
            ]
        unit = parse_unit(counter.unit)
        vtype = "list" if counter.per_core else ("num" if counter.is_numeric else "str")
        self.stats[name] = (
            Symbol(name, "stat", code, vtype, unit, "num" if counter.per_core else "any"),
            name_tok,
        )

    def check_counter(self, counter, val: Val, node: Tree) -> None:
        name = counter.name
        if counter.is_numeric:
            want = "list" if counter.per_core else "num"
            ok = val.vtype in ("any", want) or (want == "num" and val.vtype == "bool")
            if not ok:
                shape = "a list with one value per core" if counter.per_core else "a number"
                raise self.error(
                    node,
                    f"wrong kind: stats.{name} is a {counter.kind} and takes {shape}, but this is {_a(val.vtype)}",
                    shape,
                )
            if counter.kind == "counter" and val.is_rate:
                raise self.error(
                    node,
                    f"wrong kind: stats.{name} is a counter (a monotonic total) but rate() and delta() give gauges",
                    "the raw total read from the driver",
                )
            if val.unit is not ANY and val.unit is not None:
                want_unit = parse_unit(counter.unit)
                if not val.unit.same(want_unit):
                    hint = (
                        f'; write convert(..., "{counter.unit}")'
                        if val.unit.same_dimension(want_unit)
                        else ""
                    )
                    raise self.error(
                        node,
                        f"wrong unit: the value is in {val.unit} but stats.{name} is in {counter.unit}{hint}",
                        f"a value in {counter.unit}",
                    )
        else:
            if val.vtype not in ("any", "str"):
                raise self.error(
                    node,
                    f"wrong kind: stats.{name} is {_a(counter.kind)} counter and takes text, but this is {_a(val.vtype)}",
                    "text, e.g. str(...)",
                )
            if counter.kind == "state" and val.literals is not None:
                for lit in val.literals:
                    if lit not in counter.values:
                        raise self.error(
                            node,
                            f"wrong value: stats.{name} cannot be {lit!r}",
                            "one of " + ", ".join(repr(v) for v in counter.values),
                        )

    # -- expressions ------------------------------------------------------------------------
    def loop_var(self, tok: Token, code: str):
        compiler = self

        class _Scope:
            def __enter__(self):
                name = str(tok)
                if name in compiler.scope:
                    raise compiler.error(
                        tok, f"loop variable '{name}' hides a name defined above", "a fresh name"
                    )
                compiler.scope[name] = Symbol(name, "loop", code, "num", None, meta=tok, used=True)

            def __exit__(self, *exc):
                compiler.scope.pop(str(tok), None)

        return _Scope()

    def check_iterable(self, node: Tree, it: Val) -> None:
        if it.vtype not in ("range", "list", "any"):
            raise self.error(node, f"cannot iterate over {_a(it.vtype)}", "range(n) or a list")

    def expr(self, node: Any, ctx: _Ctx) -> Val:
        method = getattr(self, f"x_{node.data}", None)
        if method is None:  # pragma: no cover - grammar and compiler out of step
            raise self.error(node, f"unsupported expression {node.data}", "a simpler expression")
        return method(node, ctx)

    def x_number(self, node: Tree, ctx: _Ctx) -> Val:
        text = str(node.children[0]).replace("_", "")
        value = (
            int(text, 0)
            if text.lower().startswith("0x")
            else (float(text) if any(c in text for c in ".eE") else int(text))
        )
        return Val(repr(value), "num", None, const=value)

    def x_string(self, node: Tree, ctx: _Ctx) -> Val:
        value = _string_value(node.children[0])
        return Val(repr(value), "str", ANY, literals=(value,), const=value)

    def x_true(self, node, ctx):
        return Val("True", "bool", None, const=True)

    def x_false(self, node, ctx):
        return Val("False", "bool", None, const=False)

    def x_none(self, node, ctx):
        return Val("None", "none", ANY, const=None)

    def x_name(self, node: Tree, ctx: _Ctx) -> Val:
        tok = node.children[0]
        name = str(tok)
        sym = self.scope.get(name)
        if sym is None:
            known = [n for n, s in self.scope.items() if s.kind != "special"] + list(SPECIAL_NAMES)
            if name in BUILTINS or name in PARSERS:
                raise self.error(tok, f"'{name}' is a function", f"a call: {name}(...)")
            raise self.error(
                tok,
                f"unknown name '{name}'",
                _suggest(name, known, "a binding, constant or loop variable defined above"),
            )
        if ctx.once and sym.kind == "binding":
            raise self.error(
                tok,
                f"'{name}' is read every refresh; a once statement can only use once bindings and constants",
                "a once binding or a constant",
            )
        if ctx.once and name == "now":
            raise self.error(
                tok,
                "'now' changes every refresh and cannot be used in a once statement",
                "a once binding or a constant",
            )
        sym.used = True
        if sym.kind == "special" and name == "lib":
            self.uses_lib = True
        return Val(sym.code, sym.vtype, sym.unit, sym.elem, const=sym.value)

    def x_stat(self, node: Tree, ctx: _Ctx) -> Val:
        tok = node.children[0]
        name = str(tok)
        if name not in CATALOGUE:
            raise self.error(
                tok,
                f"unknown counter 'stats.{name}'",
                _suggest(name, CATALOGUE, "a counter of the Asicmon catalogue"),
            )
        if ctx.reads:
            raise self.error(
                tok, "bindings cannot use stats counters", "bindings, constants and loop variables"
            )
        if name in RUNTIME_COUNTERS:
            raise self.error(
                tok,
                f"stats.{name} is set by the runtime after the probe and cannot be used in a spec",
                "another counter",
            )
        if name not in self.stats:
            raise self.error(
                tok,
                f"stats.{name} is used before it is assigned",
                f"an assignment to stats.{name} above this line",
            )
        sym = self.stats[name][0]
        return Val(sym.code, sym.vtype, sym.unit, sym.elem, stat_kind=CATALOGUE[name].kind)

    def x_attr(self, node: Tree, ctx: _Ctx) -> Val:
        obj_node, attr = node.children
        obj = self.expr(obj_node, ctx)
        if obj.vtype not in ("any", "lib"):
            raise self.error(
                attr,
                f"{_a(obj.vtype)} has no attribute '{attr}'",
                "a value returned by a library call",
            )
        return Val(f"{obj.code}.{attr}", "any", ANY)

    def x_subscript(self, node: Tree, ctx: _Ctx) -> Val:
        obj_node, index_node = node.children
        obj = self.expr(obj_node, ctx)
        idx = self.expr(index_node, ctx)
        if obj.vtype not in ("any", "list", "dict"):
            raise self.error(obj_node, f"cannot index {_a(obj.vtype)}", "a list")
        if idx.vtype not in ("any", "num", "str"):
            raise self.error(
                index_node, f"an index must be a number, not {_a(idx.vtype)}", "a number"
            )
        return Val(
            f"{obj.code}[{idx.code}]",
            obj.elem if obj.vtype == "list" else "any",
            obj.unit,
            stat_kind=obj.stat_kind,
        )

    def x_list_(self, node: Tree, ctx: _Ctx) -> Val:
        items = [self.expr(c, ctx) for c in node.children if c is not None]
        unit = self.same_unit(node, items, "list items") if items else ANY
        elem = items[0].vtype if items and all(i.vtype == items[0].vtype for i in items) else "any"
        return Val("[" + ", ".join(i.code for i in items) + "]", "list", unit, elem)

    def x_dict_(self, node: Tree, ctx: _Ctx) -> Val:
        pairs = []
        const = {}
        for pair in (c for c in node.children if c is not None):
            k, v = (self.expr(c, ctx) for c in pair.children)
            pairs.append(f"{k.code}: {v.code}")
            if k.const is not _NO and v.const is not _NO:
                const[k.const] = v.const
            else:
                const = None
        return Val(
            "{" + ", ".join(pairs) + "}", "dict", ANY, const=const if const is not None else _NO
        )

    def comprehension(
        self, node: Tree, elem_node: Tree, comp: Tree, ctx: _Ctx
    ) -> tuple[Val, str, str]:
        var_tok, iter_node = comp.children
        it = self.expr(iter_node, ctx)
        self.check_iterable(iter_node, it)
        code = f"v_{var_tok}"
        with self.loop_var(var_tok, code):
            elem = self.expr(elem_node, _Ctx(ctx.reads, ctx.once, [*ctx.loops, (code, it.code)]))
        if elem_node.data == "call" and _out_count(elem_node):
            raise self.error(
                elem_node,
                "a call with out-parameters must be the whole right-hand side of a binding",
                "name, ... = [lib.f(..., out) for i in ...]",
            )
        return elem, f"for {code} in {it.code}", code

    def x_listcomp(self, node: Tree, ctx: _Ctx) -> Val:
        elem_node, comp = node.children
        elem, loop, _ = self.comprehension(node, elem_node, comp, ctx)
        return Val(f"[{elem.code} {loop}]", "list", elem.unit, elem.vtype, is_rate=elem.is_rate)

    def x_call_gen(self, node: Tree, ctx: _Ctx) -> Val:
        fn_node, elem_node, comp = node.children
        fn = _plain_name(fn_node)
        if fn not in AGGREGATES:
            raise self.error(
                fn_node,
                f"{fn or 'this'} cannot take a generator",
                "one of " + ", ".join(AGGREGATES),
            )
        elem, loop, _ = self.comprehension(node, elem_node, comp, ctx)
        return self.aggregate(
            node,
            fn,
            Val(f"({elem.code} {loop})", "list", elem.unit, elem.vtype, is_rate=elem.is_rate),
        )

    def aggregate(self, node: Tree, fn: str, seq: Val) -> Val:
        if seq.vtype not in ("list", "any", "range"):
            raise self.error(
                node,
                f"{fn}() needs a list or a generator, not {_a(seq.vtype)}",
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

    def x_call(self, node: Tree, ctx: _Ctx) -> Val:
        fn_node = node.children[0]
        args = _call_args(node)
        if _is_lib_call(node):
            if not ctx.reads:
                raise self.error(
                    node,
                    "library calls read the driver and belong in bindings",
                    "name = lib.function(...) above, then use the name",
                )
            if any(isinstance(a, Tree) and a.data == "out_arg" for a in args):
                raise self.error(
                    node,
                    "a call with out-parameters must be the whole right-hand side of a binding",
                    "name = lib.function(..., out)",
                )
            self.uses_lib = True
            codes = [self.expr(a, ctx).code for a in args]
            return Val(f"lib.{_callee_name(node)}({', '.join(codes)})", "any", ANY)
        fn = _plain_name(fn_node)
        if fn is None:
            raise self.error(
                fn_node,
                "only built-in functions and lib.<function> can be called",
                "one of " + ", ".join(BUILTINS),
            )
        for a in args:
            if isinstance(a, Tree) and a.data == "out_arg":
                raise self.error(a, "only library calls take out-parameters", "an expression")
        handler = getattr(self, f"f_{fn}", None)
        if handler is None:
            if fn in self.scope:
                raise self.error(
                    fn_node, f"'{fn}' is not a function", "a built-in function or lib.<function>"
                )
            raise self.error(
                fn_node,
                f"unknown function '{fn}'",
                _suggest(fn, BUILTINS, "a built-in function or lib.<function>"),
            )
        positional = [a for a in args if not (isinstance(a, Tree) and a.data == "kwarg")]
        keywords = {
            str(a.children[0]): a.children[1]
            for a in args
            if isinstance(a, Tree) and a.data == "kwarg"
        }
        return handler(node, positional, keywords, ctx)

    # built-in functions: f_<name>(node, args, kwargs, ctx) -------------------------------------
    def _arity(self, node, fn, args, kwargs, lo, hi=None, keywords=()):
        hi = lo if hi is None else hi
        for k in kwargs:
            if k not in keywords:
                raise self.error(
                    node,
                    f"{fn}() has no argument '{k}'",
                    "arguments " + (", ".join(keywords) if keywords else "by position only"),
                )
        if not lo <= len(args) <= hi:
            n = str(lo) if lo == hi else f"{lo} to {hi}"
            raise self.error(
                node,
                f"{fn}() takes {n} argument{'s' * (hi != 1)}, not {len(args)}",
                f"{n} argument{'s' * (hi != 1)}",
            )

    def f_file(self, node, args, kwargs, ctx):
        self._arity(node, "file", args, kwargs, 2)
        if not ctx.reads:
            raise self.error(
                node,
                "file() reads the driver and belongs in bindings",
                "name = file(...) above, then use the name",
            )
        path_node, parser_node = args
        if path_node.data != "string":
            raise self.error(
                path_node,
                "file() needs a path as a string",
                'a path such as "hwmon/temp1_input" or "core{c}/busy"',
            )
        path = self.template(path_node, _string_value(path_node.children[0]), ctx)
        self.uses_files = True
        convert, vtype, unit = self.parser(parser_node)
        return Val(convert.replace("TEXT", f"read({path})"), vtype, unit)

    def template(self, node: Tree, text: str, ctx: _Ctx) -> str:
        parts, names = [], []
        try:
            pieces = list(string.Formatter().parse(text))
        except ValueError as exc:
            raise self.error(
                node, f"bad path template: {exc}", 'a path with {name} fields, e.g. "core{c}/busy"'
            ) from None
        for literal, field_name, _spec, _conv in pieces:
            parts.append(literal.replace("%", "%%"))
            if field_name is not None:
                if not field_name.isidentifier():
                    raise self.error(
                        node, f"bad path template field {{{field_name}}}", "a name between braces"
                    )
                val = self.x_name(
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

    def parser(self, node: Tree) -> tuple[str, str, Any]:
        """A file() parser: (code with TEXT placeholder, value type, unit)."""
        expected = 'a parser: int, float, hex, str, unit("mW"), regex(r"...", int), field("key", int) or words("key", int)'
        if node.data == "name" and str(node.children[0]) in PARSERS:
            name = str(node.children[0])
            return f"{PARSERS[name]}(TEXT)", "str" if name == "str" else "num", ANY
        if node.data == "call":
            fn = _plain_name(node.children[0])
            args = _call_args(node)
            if fn == "unit" and len(args) == 1 and args[0].data == "string":
                text = _string_value(args[0].children[0])
                try:
                    unit = parse_unit(text)
                except UnitError as exc:
                    raise self.error(args[0], str(exc), "a unit such as mW, W, MHz, mC") from None
                return f"_rt.parse_unit(TEXT, {text!r})", "num", unit
            if fn in ("regex", "field", "words") and len(args) == 2 and args[0].data == "string":
                pattern = _string_value(args[0].children[0])
                conv_node = args[1]
                if conv_node.data != "name" or str(conv_node.children[0]) not in PARSERS:
                    raise self.error(
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
                    raise self.error(
                        args[0], f"bad regular expression: {exc}", "a valid regular expression"
                    ) from None
                if compiled.groups != 1:
                    raise self.error(
                        args[0],
                        f"the regular expression has {compiled.groups} groups",
                        "exactly one (group) around the value",
                    )
                const = self.module_const(f"re.compile({pattern!r})")
                return f"_rt.regex_field({const}, TEXT, {PARSERS[conv]})", vtype, ANY
        raise self.error(node, "unknown parser", expected)

    def module_const(self, code: str) -> str:
        name = f"_K{len(self.module_consts)}"
        self.module_consts.append(f"{name} = {code}")
        return name

    def f_optional(self, node, args, kwargs, ctx):
        raise self.error(
            node,
            "optional() must be the whole right-hand side of a binding",
            "name = optional(<a read>)",
        )

    def _rate_like(self, fn, node, args, kwargs, ctx):
        self._arity(node, fn, args, kwargs, 1, 1, ("wrap",))
        if ctx.once:
            raise self.error(
                node,
                f"{fn}() compares two refreshes and cannot be used in a once statement",
                "a per-refresh binding or counter",
            )
        val = self.expr(args[0], ctx)
        if val.stat_kind is not None and val.stat_kind != "counter":
            raise self.error(
                args[0],
                f"{fn}() needs a monotonic counter, but this is a {val.stat_kind}",
                "a counter: a binding read from the driver or a stats counter of kind counter",
            )
        if val.vtype not in ("num", "any"):
            raise self.error(
                args[0], f"{fn}() needs a number, not {_a(val.vtype)}", "a monotonic counter"
            )
        wrap = "None"
        if "wrap" in kwargs:
            w = self.expr(kwargs["wrap"], ctx)
            if not isinstance(w.const, int) or w.const <= 0:
                raise self.error(
                    kwargs["wrap"],
                    "wrap must be a positive integer constant",
                    "the counter's modulus, e.g. 2**32",
                )
            wrap = repr(w.const)
        self.slot += 1
        method = "_rate" if fn == "rate" else "_delta"
        # Hoisted out of the counter's expression so that the previous value of every
        # counter (every core's, in a loop) is updated on every refresh, even when the
        # expression around it fails.
        var = f"_r{self.slot}"
        if not ctx.loops:
            call = f"self.{method}({self.slot}, {val.code}, now, {wrap})"
            code = var
        else:
            names = ", ".join(v for v, _ in ctx.loops)
            key = f"({self.slot}, {names})"
            loops = " ".join(f"for {v} in {it}" for v, it in ctx.loops)
            call = f"{{{names if len(ctx.loops) == 1 else '(' + names + ')'}: self.{method}({key}, {val.code}, now, {wrap}) {loops}}}"
            code = f"{var}[{names if len(ctx.loops) == 1 else '(' + names + ')'}]"
        self.hoisted += [
            "try:",
            f"    {var} = {call}",
            f"except {VALUE_ERRORS}:",
            f"    {var} = None",
        ]
        unit = val.unit
        if fn == "rate" and unit is not ANY:
            unit = (unit or Unit((), 1.0)) / parse_unit("s")
            unit = Unit(unit.dims, unit.scale)
        return Val(code, "num", unit, is_rate=True)

    def f_rate(self, node, args, kwargs, ctx):
        return self._rate_like("rate", node, args, kwargs, ctx)

    def f_delta(self, node, args, kwargs, ctx):
        return self._rate_like("delta", node, args, kwargs, ctx)

    def f_convert(self, node, args, kwargs, ctx):
        self._arity(node, "convert", args, kwargs, 2)
        val = self.expr(args[0], ctx)
        if args[1].data != "string":
            raise self.error(
                args[1], "convert() needs the target unit as a string", 'a unit such as "W"'
            )
        try:
            target = parse_unit(_string_value(args[1].children[0]))
        except UnitError as exc:
            raise self.error(args[1], str(exc), "a unit such as W, C, MHz, B") from None
        if val.unit is ANY or val.unit is None:
            raise self.error(
                args[0],
                "convert() needs a value with a known unit",
                "a binding annotated with its unit, e.g. power: mW = ...",
            )
        if not val.unit.same_dimension(target):
            raise self.error(
                args[1],
                f"cannot convert {val.unit} to {target}",
                f"a unit of the same dimension as {val.unit}",
            )
        factor = val.unit.factor_to(target)
        code = val.code if factor == 1 else f"({val.code}) * {factor!r}"
        return Val(code, val.vtype, target, val.elem, is_rate=val.is_rate)

    def f_flags(self, node, args, kwargs, ctx):
        self._arity(node, "flags", args, kwargs, 2, 3)
        mask = self.expr(args[0], ctx)
        names = self.expr(args[1], ctx)
        if (
            names.vtype != "dict"
            or names.const is _NO
            or not all(isinstance(k, int) and isinstance(v, str) for k, v in names.const.items())
        ):
            raise self.error(
                args[1],
                "flags() needs a constant {bit: name} dictionary",
                '{0x1: "thermal", 0x2: "power"}',
            )
        none = repr("none")
        literals = None
        if len(args) == 3:
            n = self.expr(args[2], ctx)
            if not isinstance(n.const, str):
                raise self.error(args[2], "the name for no flags must be a string", '"none"')
            none = repr(n.const)
        const = self.module_const(repr(names.const))
        return Val(f"_rt.flags({mask.code}, {const}, {none})", "str", ANY, literals=literals)

    def f_clamp(self, node, args, kwargs, ctx):
        self._arity(node, "clamp", args, kwargs, 3)
        vals = [self.expr(a, ctx) for a in args]
        unit = self.same_unit(node, vals, "clamp() arguments")
        return Val(
            f"_rt.clamp({', '.join(v.code for v in vals)})", "num", unit, is_rate=vals[0].is_rate
        )

    def f_range(self, node, args, kwargs, ctx):
        self._arity(node, "range", args, kwargs, 1, 2)
        vals = [self.expr(a, ctx) for a in args]
        return Val(f"range({', '.join(v.code for v in vals)})", "range", None, "num")

    def _minmax(self, fn, node, args, kwargs, ctx):
        self._arity(node, fn, args, kwargs, 1, 16)
        vals = [self.expr(a, ctx) for a in args]
        if len(vals) == 1:
            return self.aggregate(node, fn, vals[0])
        unit = self.same_unit(node, vals, f"{fn}() arguments")
        return Val(
            f"{fn}({', '.join(v.code for v in vals)})",
            "num",
            unit,
            is_rate=any(v.is_rate for v in vals),
        )

    def f_max(self, node, args, kwargs, ctx):
        return self._minmax("max", node, args, kwargs, ctx)

    def f_min(self, node, args, kwargs, ctx):
        return self._minmax("min", node, args, kwargs, ctx)

    def _seq_fn(self, fn, node, args, kwargs, ctx):
        self._arity(node, fn, args, kwargs, 1)
        return self.aggregate(node, fn, self.expr(args[0], ctx))

    def f_sum(self, node, args, kwargs, ctx):
        return self._seq_fn("sum", node, args, kwargs, ctx)

    def f_mean(self, node, args, kwargs, ctx):
        return self._seq_fn("mean", node, args, kwargs, ctx)

    def f_len(self, node, args, kwargs, ctx):
        return self._seq_fn("len", node, args, kwargs, ctx)

    def f_any(self, node, args, kwargs, ctx):
        return self._seq_fn("any", node, args, kwargs, ctx)

    def f_all(self, node, args, kwargs, ctx):
        return self._seq_fn("all", node, args, kwargs, ctx)

    def f_abs(self, node, args, kwargs, ctx):
        self._arity(node, "abs", args, kwargs, 1)
        v = self.expr(args[0], ctx)
        return Val(f"abs({v.code})", "num", v.unit, is_rate=v.is_rate)

    def f_round(self, node, args, kwargs, ctx):
        self._arity(node, "round", args, kwargs, 1, 2)
        vals = [self.expr(a, ctx) for a in args]
        return Val(
            f"round({', '.join(v.code for v in vals)})",
            "num",
            vals[0].unit,
            is_rate=vals[0].is_rate,
        )

    def _convert_fn(self, fn, vtype, node, args, kwargs, ctx):
        self._arity(node, fn, args, kwargs, 1)
        v = self.expr(args[0], ctx)
        unit = v.unit if vtype == "num" else ANY
        literals = (str(v.const),) if vtype == "str" and v.const is not _NO else None
        return Val(
            f"{fn}({v.code})", vtype, unit, is_rate=v.is_rate and vtype == "num", literals=literals
        )

    def f_int(self, node, args, kwargs, ctx):
        return self._convert_fn("int", "num", node, args, kwargs, ctx)

    def f_float(self, node, args, kwargs, ctx):
        return self._convert_fn("float", "num", node, args, kwargs, ctx)

    def f_str(self, node, args, kwargs, ctx):
        return self._convert_fn("str", "str", node, args, kwargs, ctx)

    def f_bool(self, node, args, kwargs, ctx):
        return self._convert_fn("bool", "bool", node, args, kwargs, ctx)

    # operators ------------------------------------------------------------------------------
    def same_unit(self, node: Tree, vals: list[Val], what: str) -> Any:
        known = [v.unit for v in vals if v.unit is not ANY and v.unit is not None]
        for u in known[1:]:
            if not u.same(known[0]):
                raise self.error(
                    node,
                    f"unit mismatch: {what} are in {known[0]} and {u}",
                    f'the same unit on both sides (use convert(x, "{known[0]}"))',
                )
        if known:
            return known[0]
        return None if all(v.unit is None for v in vals) else ANY

    def numeric(self, node: Tree, vals: list[Val], op: str) -> None:
        for v, child in zip(vals, node.children, strict=False):
            if v.vtype not in ("num", "bool", "any"):
                raise self.error(child, f"'{op}' needs numbers, not {_a(v.vtype)}", "a number")

    def _binary(self, node: Tree, ctx: _Ctx, op: str) -> Val:
        left, right = (self.expr(c, ctx) for c in node.children)
        if op == "+" and left.vtype == "str" and right.vtype == "str":
            const = (
                left.const + right.const
                if left.const is not _NO and right.const is not _NO
                else _NO
            )
            return Val(f"({left.code} + {right.code})", "str", ANY, const=const)
        self.numeric(node, [left, right], op)
        if op in ("+", "-"):
            unit = self.same_unit(node, [left, right], f"the operands of '{op}'")
        elif op in ("*", "/", "//", "%"):
            unit = _mul_units(left.unit, right.unit, op)
        elif op == "**":
            unit = None if left.unit is None and right.unit is None else ANY
        else:  # bit operations
            unit = None if left.unit is None else ANY
        const = _NO
        if left.const is not _NO and right.const is not _NO:
            try:
                const = _fold(op, left.const, right.const)
            except (ArithmeticError, TypeError, ValueError):
                raise self.error(
                    node, f"'{op}' cannot be computed on these constants", "valid arithmetic"
                ) from None
        code = repr(const) if const is not _NO else f"({left.code} {op} {right.code})"
        return Val(code, "num", unit, is_rate=left.is_rate or right.is_rate, const=const)

    def x_add(self, n, c):
        return self._binary(n, c, "+")

    def x_sub(self, n, c):
        return self._binary(n, c, "-")

    def x_mul(self, n, c):
        return self._binary(n, c, "*")

    def x_div(self, n, c):
        return self._binary(n, c, "/")

    def x_floordiv(self, n, c):
        return self._binary(n, c, "//")

    def x_mod(self, n, c):
        return self._binary(n, c, "%")

    def x_pow(self, n, c):
        return self._binary(n, c, "**")

    def x_bit_or(self, n, c):
        return self._binary(n, c, "|")

    def x_bit_and(self, n, c):
        return self._binary(n, c, "&")

    def x_lshift(self, n, c):
        return self._binary(n, c, "<<")

    def x_rshift(self, n, c):
        return self._binary(n, c, ">>")

    def x_neg(self, node, ctx):
        v = self.expr(node.children[0], ctx)
        self.numeric(node, [v], "-")
        const = -v.const if v.const is not _NO else _NO
        return Val(
            repr(const) if const is not _NO else f"(-{v.code})",
            "num",
            v.unit,
            is_rate=v.is_rate,
            const=const,
        )

    def x_compare(self, node, ctx):
        left_node, op, right_node = node.children
        left, right = self.expr(left_node, ctx), self.expr(right_node, ctx)
        if {left.vtype, right.vtype} <= {"num", "bool", "any"}:
            self.same_unit(node, [left, right], f"the operands of '{op}'")
        return Val(f"({left.code} {op} {right.code})", "bool", None)

    def x_not_(self, node, ctx):
        v = self.expr(node.children[0], ctx)
        return Val(f"(not {v.code})", "bool", None)

    def _logic(self, node, ctx, op):
        left, right = (self.expr(c, ctx) for c in node.children)
        vtype = left.vtype if left.vtype == right.vtype else "any"
        return Val(
            f"({left.code} {op} {right.code})", vtype, left.unit if left.unit == right.unit else ANY
        )

    def x_and_(self, node, ctx):
        return self._logic(node, ctx, "and")

    def x_or_(self, node, ctx):
        return self._logic(node, ctx, "or")

    def x_ternary(self, node, ctx):
        a_node, cond_node, b_node = node.children
        a, cond, b = self.expr(a_node, ctx), self.expr(cond_node, ctx), self.expr(b_node, ctx)
        if a.vtype in ("num", "any") and b.vtype in ("num", "any"):
            unit = self.same_unit(node, [a, b], "the two branches")
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

    # -- code generation ------------------------------------------------------------------------
    def emit(self) -> str:
        once_used = [s for s in self.scope.values() if s.kind == "once"]
        out = [
            f"# Generated by asimov from {Path(self.filename).name}; do not edit.",
            "import re  # noqa: F401",
            "",
            "from fleet.asimov import runtime as _rt",
            "from fleet.asimov.runtime import Out as _Out  # noqa: F401",
            "",
            *self.module_consts,
            "",
            "",
            "class Monitor(_rt.DeviceMonitor):",
            f"    SPEC = {self.device!r}",
            f"    SOURCE = {self.filename!r}",
            f"    COUNTERS = {tuple(self.stats)!r}",
            f"    ERROR_STATUS = {self.error_status!r}",
            f"    USES_FILES = {self.uses_files!r}",
            f"    USES_LIB = {self.uses_lib!r}",
            "",
            "    def _open(self):",
            "        lib, index = self.lib, self.index  # noqa: F841",
            "        read = self.files.read_text if self.files is not None else None  # noqa: F841",
        ]
        out += ["        " + line for line in self.open_lines] or []
        out += [
            "",
            "    def _probe(self, now):",
            "        lib, index = self.lib, self.index  # noqa: F841",
            "        read = self.files.read_text if self.files is not None else None  # noqa: F841",
        ]
        out += [f"        {s.code} = self._{s.code}" for s in once_used]
        out += ["        " + line for line in self.probe_lines]
        out.append(
            "        return {" + ", ".join(f"{name!r}: s_{name}" for name in self.stats) + "}"
        )
        return "\n".join(out) + "\n"


# -- small helpers ----------------------------------------------------------------------------


def _position(where: Any) -> tuple[int, int]:
    if isinstance(where, Token):
        return where.line or 1, where.column or 1
    meta = getattr(where, "meta", None)
    if meta is not None and not getattr(meta, "empty", True):
        return meta.line, meta.column
    if isinstance(where, Tree):
        for child in where.children:
            if isinstance(child, (Token, Tree)):
                line, col = _position(child)
                if line:
                    return line, col
    return 1, 1


def _string_value(tok: Any) -> str:
    text = str(tok.children[0]) if isinstance(tok, Tree) else str(tok)
    raw = text[0] in "rR"
    body = text[2:-1] if raw else text[1:-1]
    if raw:
        return body
    return body.encode("latin-1", "backslashreplace").decode("unicode_escape")


def _call_args(node: Tree) -> list:
    args = node.children[1] if len(node.children) > 1 else None
    return [] if args is None else list(args.children)


def _is_lib_call(node: Any) -> bool:
    if not isinstance(node, Tree) or node.data != "call":
        return False
    fn = node.children[0]
    return (
        fn.data == "attr"
        and fn.children[0].data == "name"
        and str(fn.children[0].children[0]) == "lib"
    )


def _is_call_named(node: Any, name: str) -> bool:
    return isinstance(node, Tree) and node.data == "call" and _plain_name(node.children[0]) == name


def _callee_name(node: Tree) -> str:
    fn = node.children[0]
    return str(fn.children[1]) if fn.data == "attr" else str(fn.children[0])


def _plain_name(node: Tree) -> str | None:
    return str(node.children[0]) if isinstance(node, Tree) and node.data == "name" else None


def _out_count(node: Tree) -> int:
    if not isinstance(node, Tree) or node.data != "call":
        return 0
    return sum(1 for a in _call_args(node) if isinstance(a, Tree) and a.data == "out_arg")


def _mul_units(a: Any, b: Any, op: str) -> Any:
    if a is ANY or b is ANY:
        return ANY
    if a is None and b is None:
        return None
    one = Unit((), 1.0)
    if op in ("//", "%"):
        return a if b is None else ANY
    result = (a or one) * (b or one) if op == "*" else (a or one) / (b or one)
    return Unit(result.dims, result.scale)


def _fold(op: str, a: Any, b: Any) -> Any:
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    if op == "/":
        return a / b
    if op == "//":
        return a // b
    if op == "%":
        return a % b
    if op == "**":
        if isinstance(b, int) and b > 4096:
            raise ValueError("too large")
        return a**b
    if op == "|":
        return a | b
    if op == "&":
        return a & b
    if op == "<<":
        return a << b
    if op == ">>":
        return a >> b
    raise ValueError(op)


def _a(vtype: str) -> str:
    return {
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
    }.get(vtype, vtype)


def _suggest(name: str, known: Any, what: str) -> str:
    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
    return f"{what} (did you mean '{close[0]}'?)" if close else what


# -- entry points ------------------------------------------------------------------------------


def compile_spec(text: str, filename: str = "<spec>") -> CompiledSpec:
    """Compiles spec text; raises `AsimovError` (syntax) or `SpecErrors` (checks)."""
    return Compiler(text, filename).run()


def compile_file(path: str | Path) -> CompiledSpec:
    path = Path(path)
    return compile_spec(path.read_text(), str(path))


def check_spec(text: str, filename: str = "<spec>") -> list[AsimovError]:
    """All errors of a spec (empty when it is fine)."""
    try:
        compile_spec(text, filename)
    except AsimovError as exc:
        return [exc]
    except SpecErrors as exc:
        return exc.errors
    return []
