"""Reading lark parse trees: positions, string literals, and the shapes of calls."""

from __future__ import annotations

from typing import Any

from lark import Token, Tree

__all__ = [
    "call_args",
    "callee_name",
    "is_call_named",
    "is_lib_call",
    "out_count",
    "plain_name",
    "position",
    "string_value",
]


def position(where: Any) -> tuple[int, int]:
    if isinstance(where, Token):
        return where.line or 1, where.column or 1
    meta = getattr(where, "meta", None)
    if meta is not None and not getattr(meta, "empty", True):
        return meta.line, meta.column
    if isinstance(where, Tree):
        for child in where.children:
            if isinstance(child, (Token, Tree)):
                line, col = position(child)
                if line:
                    return line, col
    return 1, 1


def string_value(tok: Any) -> str:
    text = str(tok.children[0]) if isinstance(tok, Tree) else str(tok)
    raw = text[0] in "rR"
    body = text[2:-1] if raw else text[1:-1]
    if raw:
        return body
    return body.encode("latin-1", "backslashreplace").decode("unicode_escape")


def call_args(node: Tree) -> list:
    args = node.children[1] if len(node.children) > 1 else None
    return [] if args is None else list(args.children)


def is_lib_call(node: Any) -> bool:
    if not isinstance(node, Tree) or node.data != "call":
        return False
    fn = node.children[0]
    return (
        fn.data == "attr"
        and fn.children[0].data == "name"
        and str(fn.children[0].children[0]) == "lib"
    )


def is_call_named(node: Any, name: str) -> bool:
    return isinstance(node, Tree) and node.data == "call" and plain_name(node.children[0]) == name


def callee_name(node: Tree) -> str:
    fn = node.children[0]
    return str(fn.children[1]) if fn.data == "attr" else str(fn.children[0])


def plain_name(node: Tree) -> str | None:
    return str(node.children[0]) if isinstance(node, Tree) and node.data == "name" else None


def out_count(node: Tree) -> int:
    if not isinstance(node, Tree) or node.data != "call":
        return 0
    return sum(1 for a in call_args(node) if isinstance(a, Tree) and a.data == "out_arg")
