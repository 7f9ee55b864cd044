"""Parsing Asimov with lark (LALR) into the typed tree of `fleet.asimov.language.nodes`, and turning
lark's exceptions into `AsimovError`s (file, line, column and what was expected)."""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path

from lark import Lark, Token
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken

from fleet.asimov.errors import AsimovError
from fleet.asimov.language.builder import LiteralError, TreeBuilder
from fleet.asimov.language.nodes import Spec

__all__ = ["parse"]

GRAMMAR = Path(__file__).with_name("grammar.lark")
_OPEN = {"LPAR", "LSQB", "LBRACE"}
_CLOSE = {"RPAR", "RSQB", "RBRACE"}
_NAMED = {
    "NAME": "a name",
    "NUMBER": "a number",
    "STRING": "a string",
    "_NL": "end of line",
    "COMPARE": "a comparison operator",
    "$END": "end of file",
}


class _BracketNewlines:
    """Drops newlines inside brackets, so a call or a list may span lines, as in Python."""

    always_accept = ("_NL",)

    def __init__(self) -> None:
        self.open: list[Token] = []  # brackets not closed yet, for error messages

    def process(self, stream):
        self.open = []
        for tok in stream:
            if tok.type in _OPEN:
                self.open.append(tok)
            elif tok.type in _CLOSE:
                if self.open:
                    self.open.pop()
            elif tok.type == "_NL" and self.open:
                continue
            yield tok


_POSTLEX = _BracketNewlines()
_CLOSING = {"LPAR": "')'", "LSQB": "']'", "LBRACE": "'}'"}


@lru_cache(maxsize=1)
def _parser() -> Lark:
    return Lark(
        GRAMMAR.read_text(),
        parser="lalr",
        postlex=_POSTLEX,
        keep_all_tokens=True,  # the builder takes positions from keywords and brackets too
        maybe_placeholders=True,
        transformer=TreeBuilder(),
        cache=_cache_file(),
    )


def _cache_file() -> str | bool:
    """Where lark keeps the parser's tables once built (80 ms of every process that parses a
    spec: each web, worker and test process compiles the shipped specs when it starts; 12 ms
    to load them): var/cache of the project (ASICMON_VAR_DIR), never a shared temporary
    folder, where another user could leave a file for it to unpickle. Lark rebuilds the
    tables when the grammar, its options or lark's version change, or the file cannot be
    read; without a folder it can write, nothing is kept."""
    folder = Path(os.environ.get("ASICMON_VAR_DIR") or Path(__file__).resolve().parents[3] / "var") / "cache"
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        return False
    return str(folder / "asimov-grammar.lark")


@lru_cache(maxsize=1)
def _terminal_text() -> dict[str, str]:
    out = dict(_NAMED)
    for term in _parser().terminals:
        if term.name not in out and term.pattern.type == "str":
            out[term.name] = repr(term.pattern.value)
    return out


def describe_terminal(name: str) -> str:
    return _terminal_text().get(name, name.lower())


def describe_expected(names: set[str]) -> str:
    names = {n for n in names if not n.startswith("__")}
    if {"NAME", "NUMBER", "STRING"} <= names:
        rest = sorted(
            describe_terminal(n)
            for n in names
            - {
                "NAME",
                "NUMBER",
                "STRING",
                "LPAR",
                "LSQB",
                "LBRACE",
                "MINUS",
                "NOT",
                "TRUE",
                "FALSE",
                "NONE",
                "STATS",
            }
        )
        return "an expression" + (f" or {', '.join(rest)}" if rest else "")
    texts = sorted(describe_terminal(n) for n in names)
    if len(texts) == 1:
        return texts[0]
    if len(texts) == 2:
        return f"{texts[0]} or {texts[1]}"
    return "one of " + ", ".join(texts[:-1]) + " or " + texts[-1]


def _describe_token(tok: Token) -> str:
    if tok.type == "$END":
        return "end of file"
    if tok.type == "_NL":
        return "end of line"
    if tok.type == "NAME":
        return f"name {tok.value!r}"
    if tok.type in ("NUMBER", "STRING"):
        return f"{tok.type.lower()} {tok.value}"
    return repr(str(tok.value))


def parse(text: str, filename: str = "<spec>") -> Spec:
    """Parses a spec into its typed tree; raises `AsimovError` with position and expectation
    on bad syntax."""
    if not text.endswith("\n"):
        text += "\n"
    lines = text.splitlines()

    def error(message: str, line: int, column: int, expected: str) -> AsimovError:
        source = lines[line - 1] if 0 < line <= len(lines) else ""
        return AsimovError(message, filename, line, column, source, expected)

    try:
        return _parser().parse(text)
    except LiteralError as exc:
        raise error(exc.message, exc.token.line, exc.token.column, exc.expected) from None
    except UnexpectedToken as exc:
        tok = exc.token
        line, column = exc.line, exc.column
        unclosed = _POSTLEX.open[-1] if _POSTLEX.open else None
        if unclosed is not None and (tok.type == "$END" or (tok.line or 0) > unclosed.line):
            raise error(
                f"'{unclosed.value}' is never closed",
                unclosed.line,
                unclosed.column,
                _CLOSING[unclosed.type],
            ) from None
        if tok.type == "_NL":  # point just after the last thing on the line
            line = tok.line
            column = len(lines[line - 1].rstrip()) + 1 if 0 < line <= len(lines) else column
        if tok.type == "$END":
            line = len(lines)
            column = len(lines[-1]) + 1 if lines else 1
        raise error(
            f"unexpected {_describe_token(tok)}", line, column, describe_expected(set(exc.expected))
        ) from None
    except UnexpectedCharacters as exc:
        char = text[exc.pos_in_stream] if exc.pos_in_stream < len(text) else ""
        allowed = set(exc.allowed or ())
        expected = (
            describe_expected(allowed)
            if len(allowed) <= 4
            else "a name, a number, a string, an operator or a bracket"
        )
        raise error(f"unexpected character {char!r}", exc.line, exc.column, expected) from None
    except UnexpectedEOF as exc:
        raise error(
            "unexpected end of file",
            len(lines),
            len(lines[-1]) + 1 if lines else 1,
            describe_expected(set(exc.expected)),
        ) from None
    except UnexpectedInput as exc:  # pragma: no cover - other lark failures
        raise error(
            str(exc).splitlines()[0],
            getattr(exc, "line", 1),
            getattr(exc, "column", 1),
            "valid Asimov",
        ) from None
