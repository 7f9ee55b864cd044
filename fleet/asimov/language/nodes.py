"""The typed tree of a spec: one frozen dataclass per statement and expression form, each
with its source span. `fleet.asimov.language.builder` makes it from lark's parse; the checker
(`fleet.asimov.checking.checker`) and code generation (`fleet.asimov.codegen`) only read it.

A node's span starts where lark's positions start it: at its first token, or at the opening
bracket when its first part is in parentheses (``(a + b) * c`` starts at ``(``, while the
``a + b`` inside starts at ``a``). Errors are reported at ``node.line``, ``node.column``.

Nodes compare by identity, so that what the checker learns about each one can be kept in a
dict keyed by the node (`fleet.asimov.checking.checker.CheckedSpec.facts`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = [
    "Action",
    "Annotation",
    "Attr",
    "Diagnose",
    "Events",
    "BinOp",
    "Binding",
    "BoolOp",
    "Boolean",
    "Call",
    "CallGen",
    "CallStatement",
    "Compare",
    "Const",
    "Device",
    "DictExpr",
    "Discover",
    "ErrorCode",
    "Expr",
    "For",
    "Health",
    "Ident",
    "IfElse",
    "Keyword",
    "ListComp",
    "ListExpr",
    "Name",
    "Neg",
    "Node",
    "NoneLiteral",
    "Not",
    "Number",
    "Out",
    "Pair",
    "Performance",
    "StateField",
    "FaultRule",
    "Rule",
    "Cascade",
    "Span",
    "Spec",
    "Stat",
    "StatsAssign",
    "Statement",
    "String",
    "Subscript",
    "read_form",
]


@dataclass(frozen=True)
class Span:
    """Where a node is in the source: 1-based lines and columns, the end just past it."""

    line: int
    column: int
    end_line: int
    end_column: int


NOWHERE = Span(1, 1, 1, 1)


@dataclass(frozen=True, eq=False)
class Node:
    span: Span = field(default=NOWHERE, kw_only=True, repr=False)

    @property
    def line(self) -> int:
        return self.span.line

    @property
    def column(self) -> int:
        return self.span.column


@dataclass(frozen=True, eq=False)
class Ident(Node):
    """A name where the grammar has one (a counter, a target, a keyword): its text and place.
    A quoted unit annotation (``busy: "%" = ...``) is one too, with the string's text."""

    text: str


# -- expressions ----------------------------------------------------------------------------


class Expr(Node):
    """Any expression."""


@dataclass(frozen=True, eq=False)
class Number(Expr):
    value: int | float
    text: str  # as written (``0x1f``, ``1_000``): actions pass it on unchanged


@dataclass(frozen=True, eq=False)
class String(Expr):
    value: str


@dataclass(frozen=True, eq=False)
class Boolean(Expr):
    value: bool


@dataclass(frozen=True, eq=False)
class NoneLiteral(Expr):
    pass


@dataclass(frozen=True, eq=False)
class Name(Expr):
    id: str


@dataclass(frozen=True, eq=False)
class Stat(Expr):
    """``stats.counter`` read in an expression."""

    counter: Ident


@dataclass(frozen=True, eq=False)
class Attr(Expr):
    obj: Expr
    attr: Ident


@dataclass(frozen=True, eq=False)
class Subscript(Expr):
    obj: Expr
    index: Expr


@dataclass(frozen=True, eq=False)
class ListExpr(Expr):
    items: tuple[Expr, ...]


@dataclass(frozen=True, eq=False)
class Pair(Node):
    key: Expr
    value: Expr


@dataclass(frozen=True, eq=False)
class DictExpr(Expr):
    pairs: tuple[Pair, ...]


@dataclass(frozen=True, eq=False)
class For(Node):
    """``for var in iterable`` of a comprehension."""

    var: Ident
    iterable: Expr


@dataclass(frozen=True, eq=False)
class ListComp(Expr):
    element: Expr
    loop: For


@dataclass(frozen=True, eq=False)
class Out(Node):
    """``out``: an out-parameter of a C-style library call."""


@dataclass(frozen=True, eq=False)
class Keyword(Node):
    name: Ident
    value: Expr


@dataclass(frozen=True, eq=False)
class Call(Expr):
    func: Expr
    args: tuple[Expr | Out | Keyword, ...]

    @property
    def function_name(self) -> str | None:
        """``f`` of ``f(...)``: the built-in called, if the callee is a plain name."""
        return self.func.id if isinstance(self.func, Name) else None

    @property
    def lib_function(self) -> str | None:
        """``f`` of ``lib.f(...)``: the library function called, if this is a library call."""
        func = self.func
        if isinstance(func, Attr) and isinstance(func.obj, Name) and func.obj.id == "lib":
            return func.attr.text
        return None

    @property
    def out_count(self) -> int:
        return sum(1 for arg in self.args if isinstance(arg, Out))

    @property
    def positional(self) -> list[Expr | Out]:
        return [arg for arg in self.args if not isinstance(arg, Keyword)]

    @property
    def keywords(self) -> list[Keyword]:
        return [arg for arg in self.args if isinstance(arg, Keyword)]


@dataclass(frozen=True, eq=False)
class CallGen(Expr):
    """``f(element for var in iterable)``: an aggregate over a generator."""

    func: Expr
    element: Expr
    loop: For


@dataclass(frozen=True, eq=False)
class BinOp(Expr):
    """Arithmetic and bit operations: ``+ - * / // % ** | & << >>``."""

    op: str
    left: Expr
    right: Expr


@dataclass(frozen=True, eq=False)
class Neg(Expr):
    operand: Expr


@dataclass(frozen=True, eq=False)
class Compare(Expr):
    op: str
    left: Expr
    right: Expr


@dataclass(frozen=True, eq=False)
class Not(Expr):
    operand: Expr


@dataclass(frozen=True, eq=False)
class BoolOp(Expr):
    """``and`` and ``or``."""

    op: str
    left: Expr
    right: Expr


@dataclass(frozen=True, eq=False)
class IfElse(Expr):
    """``body if test else orelse``."""

    body: Expr
    test: Expr
    orelse: Expr


def read_form(node: Expr) -> str:
    """How a binding reads its value: ``optional`` (``optional(read)``), ``out_loop``
    (``[lib.f(..., out) for i in ...]``), ``out_call`` (``lib.f(..., out)``) or ``value``."""
    if isinstance(node, Call) and node.function_name == "optional":
        return "optional"
    if isinstance(node, ListComp) and isinstance(node.element, Call) and node.element.out_count:
        return "out_loop"
    if isinstance(node, Call) and node.out_count:
        return "out_call"
    return "value"


# -- statements -----------------------------------------------------------------------------


class Statement(Node):
    """Any statement."""


@dataclass(frozen=True, eq=False)
class Device(Statement):
    name: Ident


@dataclass(frozen=True, eq=False)
class Const(Statement):
    name: Ident
    value: Expr


@dataclass(frozen=True, eq=False)
class ErrorCode(Statement):
    """``error CODE means "status"``."""

    code: Expr
    status: String


@dataclass(frozen=True, eq=False)
class Annotation(Node):
    """``: unit`` after a binding's names (the span starts at the colon)."""

    unit: Ident


@dataclass(frozen=True, eq=False)
class Binding(Statement):
    """``names [: unit] = read``, read every refresh, or once when ``once``."""

    targets: tuple[Ident, ...]
    annotation: Annotation | None
    value: Expr
    once: bool = False


@dataclass(frozen=True, eq=False)
class CallStatement(Statement):
    """A library call made for its effect (``once lib.init()``)."""

    value: Expr
    once: bool = False


@dataclass(frozen=True, eq=False)
class StatsAssign(Statement):
    """``stats.counter = value``."""

    counter: Ident
    value: Expr


@dataclass(frozen=True, eq=False)
class Health(Statement):
    limit: Ident
    value: Expr


@dataclass(frozen=True, eq=False)
class Action(Statement):
    name: Ident
    call: Expr


@dataclass(frozen=True, eq=False)
class Performance(Statement):
    """``performance CLASS = curve(latency_us=..., ...)``: a fitted model of one operator class."""

    op_class: Ident
    model: Expr


@dataclass(frozen=True, eq=False)
class StateField(Statement):
    """``state FIELD = value``: one typed field of the device double."""

    name: Ident
    value: Expr


@dataclass(frozen=True, eq=False)
class FaultRule(Statement):
    """``fault KIND = effect(...)``: what an injected fault changes in the double; or, with
    ``word`` "rule", ``rule NAME = form(...)``: the numbers of a per-step update rule."""

    kind: Ident
    effect: Expr
    word: str = "fault"


@dataclass(frozen=True, eq=False)
class Rule(Statement):
    """``step NAME = expr`` (``when`` is "step") or ``on COMMAND NAME = expr``: an update
    rule of the device double (fleet.asimov.rules)."""

    when: Ident
    name: Ident
    value: Expr


@dataclass(frozen=True, eq=False)
class Cascade(Statement):
    """``cascade FAULT = kmsg(...)``: a driver-error fault of the double (fleet.asimov.cascades)."""

    fault: Ident
    value: Expr


@dataclass(frozen=True, eq=False)
class Events(Statement):
    catalogue: Ident
    sources: tuple[Ident, ...]


@dataclass(frozen=True, eq=False)
class Diagnose(Statement):
    command: String


@dataclass(frozen=True, eq=False)
class Discover(Statement):
    rule: Expr


@dataclass(frozen=True, eq=False)
class Spec(Node):
    statements: tuple[Statement, ...]
