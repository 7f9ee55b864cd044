"""From lark's parse to the typed tree (`fleet.asimov.language.nodes`): one method per grammar rule,
each taking the rule's parts by name, as lark's ``create_ast`` example does.

`TreeBuilder` runs inside the LALR parser (lark's ``transformer=`` option), so no lark
``Tree`` is ever built. The parser keeps every token (``keep_all_tokens``), keywords and
brackets included, and each node's span runs from its first part to its last, so positions
are those lark's ``propagate_positions`` would give, without its cost. This is the only
module that knows the shape of the grammar's rules.
"""

from __future__ import annotations

import dataclasses

from lark import Token, Transformer, v_args

from fleet.asimov.language import nodes

__all__ = ["LiteralError", "TreeBuilder", "string_value"]


class LiteralError(Exception):
    """A number or string the grammar accepts but Python cannot read (``0x_``, ``"\\x"``)."""

    def __init__(self, token: Token, message: str, expected: str) -> None:
        super().__init__(message)
        self.token = token
        self.message = message
        self.expected = expected


class _Group:
    """A parenthesised expression while the tree is built: the expression keeps its own
    span, and the rule around it starts (or ends) at the bracket."""

    __slots__ = ("node", "span")

    def __init__(self, node: nodes.Expr, span: nodes.Span) -> None:
        self.node = node
        self.span = span


def _start(part) -> tuple[int, int]:
    if isinstance(part, Token):
        return part.line, part.column
    if isinstance(part, (list, tuple)):
        return _start(part[0])
    return part.span.line, part.span.column


def _end(part) -> tuple[int, int]:
    if isinstance(part, Token):
        return part.end_line, part.end_column
    if isinstance(part, (list, tuple)):
        return _end(part[-1])
    return part.span.end_line, part.span.end_column


def _span(first, last) -> nodes.Span:
    return nodes.Span(*_start(first), *_end(last))


def _expr(part) -> nodes.Expr:
    return part.node if isinstance(part, _Group) else part


def _ident(token: Token) -> nodes.Ident:
    return nodes.Ident(str(token), span=_span(token, token))


def _parts(parts) -> tuple:
    """The nodes among a rule's parts (leaving out separators and empty optional parts)."""
    return tuple(_expr(p) for p in parts if isinstance(p, (nodes.Node, _Group)))


def string_value(token: Token) -> str:
    text = str(token)
    raw = text[0] in "rR"
    body = text[2:-1] if raw else text[1:-1]
    if raw:
        return body
    try:
        return body.encode("latin-1", "backslashreplace").decode("unicode_escape")
    except UnicodeDecodeError as exc:
        raise LiteralError(
            token,
            f"bad escape in string: {exc.reason}",
            'an escape such as \\n, \\t, \\x41 or \\u00b0 (or a raw string, r"...")',
        ) from None


def number_value(token: Token) -> int | float:
    text = str(token).replace("_", "")
    if text.lower().startswith("0x"):
        try:
            return int(text, 0)
        except ValueError:
            raise LiteralError(token, f"bad number {str(token)!r}", "hex digits after 0x") from None
    return float(text) if any(ch in text for ch in ".eE") else int(text)


def _string(token: Token) -> nodes.String:
    return nodes.String(string_value(token), span=_span(token, token))


def _binary(self, left, op, right) -> nodes.BinOp:
    return nodes.BinOp(str(op), _expr(left), _expr(right), span=_span(left, right))


@v_args(inline=True)
class TreeBuilder(Transformer):
    """lark callbacks, one per rule (or alias) of ``grammar.lark``."""

    # -- statements --------------------------------------------------------------------------

    def start(self, *parts) -> nodes.Spec:
        statements = tuple(p for p in parts if isinstance(p, nodes.Statement))
        span = _span(statements[0], statements[-1]) if statements else nodes.Span(1, 1, 1, 1)
        return nodes.Spec(statements, span=span)

    def device_stmt(self, keyword, name) -> nodes.Device:
        return nodes.Device(_ident(name), span=_span(keyword, name))

    def discover_stmt(self, keyword, rule) -> nodes.Discover:
        return nodes.Discover(_expr(rule), span=_span(keyword, rule))

    def health_stmt(self, keyword, name, _eq, value) -> nodes.Health:
        return nodes.Health(_ident(name), _expr(value), span=_span(keyword, value))

    def action_stmt(self, keyword, name, _eq, call) -> nodes.Action:
        return nodes.Action(_ident(name), _expr(call), span=_span(keyword, call))

    def performance_stmt(self, keyword, name, _eq, model) -> nodes.Performance:
        return nodes.Performance(_ident(name), _expr(model), span=_span(keyword, model))

    def state_stmt(self, keyword, name, _eq, value) -> nodes.StateField:
        return nodes.StateField(_ident(name), _expr(value), span=_span(keyword, value))

    def fault_stmt(self, keyword, kind, _eq, effect) -> nodes.FaultRule:
        return nodes.FaultRule(_ident(kind), _expr(effect), span=_span(keyword, effect))

    def rule_stmt(self, keyword, name, _eq, form) -> nodes.FaultRule:
        return nodes.FaultRule(_ident(name), _expr(form), "rule", span=_span(keyword, form))

    def step_stmt(self, keyword, name, _eq, value) -> nodes.Rule:
        return nodes.Rule(nodes.Ident("step", span=_span(keyword, keyword)), _ident(name), _expr(value), span=_span(keyword, value))

    def on_stmt(self, keyword, command, name, _eq, value) -> nodes.Rule:
        return nodes.Rule(_ident(command), _ident(name), _expr(value), span=_span(keyword, value))

    def cascade_stmt(self, keyword, fault, _eq, value) -> nodes.Cascade:
        return nodes.Cascade(_ident(fault), _expr(value), span=_span(keyword, value))

    def events_stmt(self, keyword, catalogue, _from, *rest) -> nodes.Events:
        sources = tuple(_ident(t) for t in rest if t.type == "NAME")
        return nodes.Events(_ident(catalogue), sources, span=_span(keyword, rest[-1]))

    def diagnose_stmt(self, keyword, command) -> nodes.Diagnose:
        return nodes.Diagnose(_string(command), span=_span(keyword, command))

    def const_stmt(self, keyword, name, _eq, value) -> nodes.Const:
        return nodes.Const(_ident(name), _expr(value), span=_span(keyword, value))

    def error_stmt(self, keyword, code, _means, status) -> nodes.ErrorCode:
        return nodes.ErrorCode(_expr(code), _string(status), span=_span(keyword, status))

    def once_stmt(self, keyword, statement) -> nodes.Binding | nodes.CallStatement:
        return dataclasses.replace(statement, once=True, span=_span(keyword, statement))

    def assign_stmt(self, targets, annotation, _eq, value) -> nodes.Binding:
        return nodes.Binding(targets, annotation, _expr(value), span=_span(targets, value))

    def targets(self, *parts) -> tuple[nodes.Ident, ...]:
        return tuple(_ident(p) for p in parts if p.type == "NAME")

    def annotation(self, colon, unit) -> nodes.Annotation:
        text = string_value(unit) if unit.type == "STRING" else str(unit)
        return nodes.Annotation(nodes.Ident(text, span=_span(unit, unit)), span=_span(colon, unit))

    def stats_stmt(self, keyword, _dot, name, _eq, value) -> nodes.StatsAssign:
        return nodes.StatsAssign(_ident(name), _expr(value), span=_span(keyword, value))

    def expr_stmt(self, value) -> nodes.CallStatement:
        return nodes.CallStatement(_expr(value), span=_span(value, value))

    # -- expressions -------------------------------------------------------------------------

    def ternary(self, body, _if, test, _else, orelse) -> nodes.IfElse:
        return nodes.IfElse(_expr(body), _expr(test), _expr(orelse), span=_span(body, orelse))

    def or_(self, left, op, right) -> nodes.BoolOp:
        return nodes.BoolOp(str(op), _expr(left), _expr(right), span=_span(left, right))

    and_ = or_

    def not_(self, keyword, operand) -> nodes.Not:
        return nodes.Not(_expr(operand), span=_span(keyword, operand))

    def compare_expr(self, left, op, right) -> nodes.Compare:
        return nodes.Compare(str(op), _expr(left), _expr(right), span=_span(left, right))

    bit_or = bit_and = lshift = rshift = add = sub = mul = div = floordiv = mod = pow = _binary

    def neg(self, minus, operand) -> nodes.Neg:
        return nodes.Neg(_expr(operand), span=_span(minus, operand))

    def attr(self, obj, _dot, name) -> nodes.Attr:
        return nodes.Attr(_expr(obj), _ident(name), span=_span(obj, name))

    def subscript(self, obj, _open, index, close) -> nodes.Subscript:
        return nodes.Subscript(_expr(obj), _expr(index), span=_span(obj, close))

    def call(self, func, _open, arguments, close) -> nodes.Call:
        return nodes.Call(_expr(func), arguments or (), span=_span(func, close))

    def call_gen(self, func, _open, element, loop, close) -> nodes.CallGen:
        return nodes.CallGen(_expr(func), _expr(element), loop, span=_span(func, close))

    def arguments(self, *parts) -> tuple:
        return _parts(parts)

    def out_arg(self, keyword) -> nodes.Out:
        return nodes.Out(span=_span(keyword, keyword))

    def kwarg(self, name, _eq, value) -> nodes.Keyword:
        return nodes.Keyword(_ident(name), _expr(value), span=_span(name, value))

    def atom(self, open_, inner, close) -> _Group:
        """``( expr )``: the only rule of ``?atom`` with no alias."""
        return _Group(_expr(inner), _span(open_, close))

    def name(self, token) -> nodes.Name:
        return nodes.Name(str(token), span=_span(token, token))

    def number(self, token) -> nodes.Number:
        return nodes.Number(number_value(token), str(token), span=_span(token, token))

    def string(self, token) -> nodes.String:
        return _string(token)

    def true(self, token) -> nodes.Boolean:
        return nodes.Boolean(True, span=_span(token, token))

    def false(self, token) -> nodes.Boolean:
        return nodes.Boolean(False, span=_span(token, token))

    def none(self, token) -> nodes.NoneLiteral:
        return nodes.NoneLiteral(span=_span(token, token))

    def stat(self, keyword, _dot, name) -> nodes.Stat:
        return nodes.Stat(_ident(name), span=_span(keyword, name))

    def list_(self, open_, *rest) -> nodes.ListExpr:
        return nodes.ListExpr(_parts(rest), span=_span(open_, rest[-1]))

    def listcomp(self, open_, element, loop, close) -> nodes.ListComp:
        return nodes.ListComp(_expr(element), loop, span=_span(open_, close))

    def dict_(self, open_, *rest) -> nodes.DictExpr:
        return nodes.DictExpr(_parts(rest), span=_span(open_, rest[-1]))

    def pair(self, key, _colon, value) -> nodes.Pair:
        return nodes.Pair(_expr(key), _expr(value), span=_span(key, value))

    def comp_for(self, keyword, var, _in, iterable) -> nodes.For:
        return nodes.For(_ident(var), _expr(iterable), span=_span(keyword, iterable))
