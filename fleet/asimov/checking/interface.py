"""What the checking tables see of the checker: the state of one spec's check and the few
operations on it (`CheckerInterface`).

The statement, expression and built-in tables, and the statements checked outside this
package (actions, cascades, discovery, events, performance, rules, state), take a checker
typed by this protocol, never the `Checker` class: the class imports the tables, the
tables import only this module, so the checker's modules form no import circle.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Protocol, runtime_checkable

from fleet.asimov.checking.values import Ctx, Symbol, Value
from fleet.asimov.errors import Abort, AsimovError
from fleet.asimov.language.nodes import Expr, Ident, Node

__all__ = ["CheckerInterface"]


@runtime_checkable
class CheckerInterface(Protocol):
    """One spec's check in progress (implemented by `fleet.asimov.checking.checker.Checker`)."""

    filename: str
    lines: list[str]
    device: str
    errors: list[AsimovError]
    scope: dict[str, Symbol]  # the names defined so far
    used: set[Symbol]
    stats: dict[str, Symbol]  # counters assigned so far
    facts: dict[Node, Value]  # every expression checked -> what is known of it
    error_status: dict[int, str]
    health: dict[str, float]
    actions: list[str]
    performance: dict[str, dict[str, float]]
    state: dict[str, object]
    fault_rules: dict[str, tuple]
    step_rules: dict[str, tuple]
    rules: dict[str, list[str]]
    rule_locals: dict[str, set[str]]
    cascades: dict[str, dict]
    discovery: dict | None
    events: dict | None
    diagnostic: tuple[str, ...]
    discovery_rule: Node | None
    uses_files: bool
    uses_lib: bool

    def expr(self, node: Expr, ctx: Ctx) -> Value:
        """Checks an expression and keeps what is found."""
        ...

    def note(self, node: Node, value: Value) -> Value:
        """Keeps what was found about a node read without `expr`."""
        ...

    def error(self, where: Node, message: str, expected: str = "") -> Abort:
        """Records an error at ``where``; raise what it returns."""
        ...

    def use(self, symbol: Symbol) -> None: ...

    def resolve(self, name: str, where: Node, ctx: Ctx) -> Symbol:
        """The symbol ``name`` stands for at ``where``."""
        ...

    def define(self, name: Ident, symbol: Symbol) -> None: ...

    def loop_var(self, var: Ident) -> AbstractContextManager[Symbol]:
        """The loop variable ``var`` is in scope inside the ``with`` block."""
        ...

    def check_reads_used(self) -> None: ...


