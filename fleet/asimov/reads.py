"""Driver reads: bindings (``name = file(...)``, ``a, b = lib.fn(handle, out, out)``, each
optionally ``once`` or ``optional(...)``) and library calls made for their effect.

A read compiles to lines of the generated ``_probe`` (every refresh) or ``_open`` (once).
"""

from __future__ import annotations

from lark import Tree

from fleet.asimov.checks import check_iterable
from fleet.asimov.state import Abort, Compilation
from fleet.asimov.tree import (
    call_args,
    callee_name,
    is_call_named,
    is_lib_call,
    out_count,
    string_value,
)
from fleet.asimov.units import UnitError, parse_unit
from fleet.asimov.values import ANY, Ctx, Symbol, Val

__all__ = ["binding", "call_stmt", "out_call"]


def call_stmt(c: Compilation, stmt: Tree, once: bool) -> None:
    node = stmt.children[0]
    if not is_lib_call(node):
        raise c.error(
            node,
            "a statement on its own must be a library call",
            "a library call such as lib.init()",
        )
    ctx = Ctx(reads=True, once=once)
    lines = c.open_lines if once else c.probe_lines
    if out_count(node):
        stmts, _ = out_call(c, node, ctx)
        lines.extend(stmts)
    else:
        lines.append(c.expr(node, ctx).code)


def binding(c: Compilation, stmt: Tree, once: bool) -> None:
    targets_node, annotation, value = stmt.children
    names = list(targets_node.children)
    unit = ANY
    if annotation is not None:
        unit_tok = annotation.children[0]
        text = string_value(unit_tok) if unit_tok.type == "STRING" else str(unit_tok)
        try:
            unit = parse_unit(text)
        except UnitError as exc:
            raise c.error(
                unit_tok, str(exc), "a unit such as W, mW, C, mC, MHz, B, KiB, count, us"
            ) from None
    ctx = Ctx(reads=True, once=once)
    lines = c.open_lines if once else c.probe_lines
    prefix = "o_" if once else "b_"
    codes = [f"{prefix}{n}" if str(n) != "_" else "_" for n in names]
    try:
        stmts, val = read_source(c, value, ctx, codes, str(names[0]))
    except Abort:
        for name in names:  # defined anyway, so that later uses do not cascade into errors
            if str(name) not in c.scope:
                c.scope[str(name)] = Symbol(str(name), "binding", "None", meta=name, used=True)
        raise
    lines.extend(c.hoisted)
    c.hoisted = []
    if val.unit is not ANY and val.unit is not None and unit is not ANY and not val.unit.same(unit):
        raise c.error(
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
        c.define(
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


def read_source(
    c: Compilation, node: Tree, ctx: Ctx, targets: list[str], label: str
) -> tuple[list[str], Val]:
    """Statements that read a binding's value into ``targets``."""
    if is_call_named(node, "optional"):
        args = call_args(node)
        if len(args) != 1:
            raise c.error(node, "optional() takes one read", "optional(<a read>)")
        inner, val = read_source(c, args[0], ctx, targets, label)
        body = ["try:"] + ["    " + s for s in inner]
        body += [
            "except Exception as _exc:",
            "    if self.classify(_exc) != 'error':",
            "        raise",
        ]
        body += [f"    {t} = None" for t in targets]
        return body, val
    outs = out_count(node) if node.data == "call" else 0
    if node.data == "listcomp" and node.children[0].data == "call" and out_count(node.children[0]):
        return out_call_loop(c, node, ctx, targets)
    if outs:
        stmts, results = out_call(c, node, ctx)
        if len(results) != len(targets):
            raise c.error(
                node,
                f"{callee_name(node)}() fills {len(results)} out-parameter{'s' * (len(results) != 1)} but {len(targets)} name{'s' * (len(targets) != 1)} {'are' if len(targets) != 1 else 'is'} assigned",
                f"{len(results)} name{'s' * (len(results) != 1)} on the left",
            )
        stmts += [f"{t} = {r}" for t, r in zip(targets, results, strict=True)]
        return stmts, Val("", "any", ANY)
    if len(targets) != 1:
        raise c.error(
            node,
            "only a call with out-parameters can fill several names",
            "one name on the left",
        )
    val = c.expr(node, ctx)
    return [f"{targets[0]} = {val.code}"], val


def out_call(c: Compilation, node: Tree, ctx: Ctx) -> tuple[list[str], list[str]]:
    """A C-style call: returns a status, fills out-parameters. Statements + out values."""
    fn = callee_name(node)
    if not is_lib_call(node):
        raise c.error(
            node, "only library functions take out-parameters", "lib.<function>(..., out)"
        )
    c.uses_lib = True
    args, outs = [], []
    for arg in call_args(node):
        if isinstance(arg, Tree) and arg.data == "out_arg":
            c.tmp += 1
            outs.append(f"_o{c.tmp}")
            args.append(outs[-1])
        elif isinstance(arg, Tree) and arg.data == "kwarg":
            raise c.error(
                arg, "library calls take positional arguments only", "an expression or out"
            )
        else:
            args.append(c.expr(arg, ctx).code)
    stmts = [f"{o} = _Out()" for o in outs]
    stmts.append(f"_st = lib.{fn}({', '.join(args)})")
    stmts.append(f"if _st != 0: raise _rt.DriverStatusError(_st, {fn!r})")
    return stmts, [f"{o}.value" for o in outs]


def out_call_loop(
    c: Compilation, node: Tree, ctx: Ctx, targets: list[str]
) -> tuple[list[str], Val]:
    elem, comp = node.children
    var_tok, iter_node = comp.children
    it = c.expr(iter_node, ctx)
    check_iterable(c, iter_node, it)
    loop_code = f"v_{var_tok}"
    with c.loop_var(var_tok, loop_code):
        inner = Ctx(ctx.reads, ctx.once, [*ctx.loops, (loop_code, it.code)])
        stmts, results = out_call(c, elem, inner)
    if len(results) != len(targets):
        raise c.error(
            node,
            f"{callee_name(elem)}() fills {len(results)} out-parameters but {len(targets)} names are assigned",
            f"{len(results)} names on the left",
        )
    lines = [f"{t} = []" for t in targets]
    lines.append(f"for {loop_code} in {it.code}:")
    lines += ["    " + s for s in stmts]
    lines += [f"    {t}.append({r})" for t, r in zip(targets, results, strict=True)]
    return lines, Val("", "list", ANY)
