"""Engine steps as data: how each serving engine names a step, and what the name tells.

The table is ``step_grammars.json`` beside this module (versioned, like the error
catalogues): each entry a regular expression over a host annotation's whole name and what its
named groups mean (batch size, prefill and decode requests, tokens, the phase). Entries of
the same shape in a JSON file named by ``ATRACE_STEP_GRAMMARS`` (one object with
``grammars``, or a list) are tried first, so a new engine's form needs no code.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import orjson

from traces.atrace.errors import TraceError

__all__ = ["Grammar", "StepInfo", "GrammarError", "grammars", "load", "match", "known_forms", "KINDS", "ENV"]

TABLE = Path(__file__).with_name("step_grammars.json")
ENV = "ATRACE_STEP_GRAMMARS"
KINDS = ("any", "prefill", "decode", "mixed")
_GROUPS = {"batch", "prefill", "decode", "tokens", "prefill_tokens", "decode_tokens", "mode", "ids", "step"}


class GrammarError(TraceError):
    """A step grammar table that cannot be used; the message says which entry and why."""


@dataclass(frozen=True)
class StepInfo:
    """What a step's name says about it (-1: not said)."""

    grammar: str
    kind: str = "any"
    batch: int = -1
    prefill: int = -1
    decode: int = -1
    tokens: int = -1
    prefill_tokens: int = -1
    decode_tokens: int = -1
    ids: tuple[str, ...] | None = None
    id_tokens: tuple[int, ...] = ()

    def merged(self, inner: StepInfo) -> StepInfo:
        """This step's facts, completed by those of an annotation nested in it (the same step
        named twice, e.g. SGLang's ``step[…]`` inside a profiling patch's ``execute_…``)."""
        def pick(a, b):
            return a if a != -1 else b
        return StepInfo(
            grammar=f"{self.grammar}+{inner.grammar}",
            kind=self.kind if self.kind != "any" else inner.kind,
            batch=pick(self.batch, inner.batch), prefill=pick(self.prefill, inner.prefill),
            decode=pick(self.decode, inner.decode), tokens=pick(self.tokens, inner.tokens),
            prefill_tokens=pick(self.prefill_tokens, inner.prefill_tokens),
            decode_tokens=pick(self.decode_tokens, inner.decode_tokens),
            ids=self.ids if self.ids is not None else inner.ids,
            id_tokens=self.id_tokens if self.ids is not None else inner.id_tokens,
        )

    def disagrees(self, other: StepInfo) -> list[str]:
        """The facts two names of one step give differently."""
        out = []
        for f in ("batch", "prefill", "decode", "tokens"):
            a, b = getattr(self, f), getattr(other, f)
            if a != -1 and b != -1 and a != b:
                out.append(f"{f} {a} vs {b}")
        return out


@dataclass(frozen=True)
class Grammar:
    id: str
    engine: str
    pattern: re.Pattern
    kind: str = "any"
    kinds: dict[str, str] = field(default_factory=dict)
    examples: tuple[str, ...] = ()

    def parse(self, name: str) -> StepInfo | None:
        m = self.pattern.match(name)
        if m is None:
            return None
        g = m.groupdict()

        def num(key: str) -> int:
            v = g.get(key)
            return int(v) if v else -1

        batch, prefill, decode = num("batch"), num("prefill"), num("decode")
        tokens, p_tok, d_tok = num("tokens"), num("prefill_tokens"), num("decode_tokens")
        kind = self.kinds.get(g.get("mode") or "", self.kind)
        if kind == "any" and prefill >= 0 and decode >= 0:
            kind = "mixed" if prefill and decode else "prefill" if prefill else "decode" if decode else "any"
        if kind == "prefill" and batch >= 0:
            prefill, decode = (batch if prefill < 0 else prefill), (0 if decode < 0 else decode)
        elif kind == "decode" and batch >= 0:
            prefill, decode = (0 if prefill < 0 else prefill), (batch if decode < 0 else decode)
        if batch < 0 and prefill >= 0 and decode >= 0:
            batch = prefill + decode
        if d_tok < 0 and decode >= 0:
            d_tok = decode  # one token a decoding request
        if p_tok < 0 and tokens >= 0 and d_tok >= 0:
            p_tok = tokens - d_tok
        if tokens < 0 and p_tok >= 0 and d_tok >= 0:
            tokens = p_tok + d_tok
        ids, id_tokens = _batch_of(g.get("ids"))
        return StepInfo(self.id, kind, batch, prefill, decode, tokens, p_tok, d_tok, ids, id_tokens)


def _batch_of(text: str | None) -> tuple[tuple[str, ...] | None, tuple[int, ...]]:
    """``id:tokens,id:tokens`` (a step's name that carries its batch)."""
    if not text:
        return None, ()
    ids, tokens = [], []
    for part in text.split(","):
        rid, _, tok = part.strip().rpartition(":")
        if rid:
            ids.append(rid)
            tokens.append(max(int(tok), 1) if tok.isdigit() else 1)
    return (tuple(ids), tuple(tokens)) if ids else (None, ())


def _entries(doc, where: str) -> list[dict]:
    entries = doc.get("grammars") if isinstance(doc, dict) else doc
    if not isinstance(entries, list):
        raise GrammarError(f"{where}: expected a list of grammars (or an object with 'grammars')")
    return entries


def _grammar(entry, where: str) -> Grammar:
    if not isinstance(entry, dict) or not isinstance(entry.get("id"), str) or not isinstance(entry.get("pattern"), str):
        raise GrammarError(f"{where}: each grammar needs a string 'id' and 'pattern'")
    name = f"{where}: grammar {entry['id']!r}"
    try:
        pattern = re.compile(entry["pattern"])
    except re.error as exc:
        raise GrammarError(f"{name}: its pattern is not a regular expression ({exc})") from None
    unknown = set(pattern.groupindex) - _GROUPS
    if unknown:
        raise GrammarError(f"{name}: unknown groups {sorted(unknown)}; known: {sorted(_GROUPS)}")
    kinds = entry.get("kinds") or {}
    kind = entry.get("kind", "any")
    if kind not in KINDS or not all(v in KINDS for v in kinds.values()):
        raise GrammarError(f"{name}: a kind must be one of {', '.join(KINDS)}")
    examples = tuple(entry.get("examples") or ())
    for example in examples:
        if not pattern.match(example):
            raise GrammarError(f"{name}: its example {example!r} does not match its pattern")
    return Grammar(entry["id"], str(entry.get("engine", "")), pattern, kind, dict(kinds), examples)


def load(path: Path | str) -> list[Grammar]:
    """The grammars of one table file."""
    try:
        doc = orjson.loads(Path(path).read_bytes())
    except (OSError, orjson.JSONDecodeError) as exc:
        raise GrammarError(f"step grammars {path}: cannot be read ({exc})") from None
    return [_grammar(e, str(path)) for e in _entries(doc, str(path))]


@lru_cache(maxsize=8)
def _table(extra: str) -> tuple[Grammar, ...]:
    return tuple((load(extra) if extra else []) + load(TABLE))


def grammars() -> tuple[Grammar, ...]:
    """The grammars in the order they are tried: ``ATRACE_STEP_GRAMMARS``'s, then the table's."""
    return _table(os.environ.get(ENV, ""))


def version() -> str:
    return str(orjson.loads(TABLE.read_bytes()).get("version", ""))


def match(name: str, table: tuple[Grammar, ...] | None = None) -> StepInfo | None:
    """What ``name`` says as an engine step, by the first grammar that matches; None if none."""
    for g in table if table is not None else grammars():
        info = g.parse(name)
        if info is not None:
            return info
    return None


def known_forms(table: tuple[Grammar, ...] | None = None) -> str:
    """The grammars known, in words (for the message of a trace that has none)."""
    table = table if table is not None else grammars()
    forms = "; ".join(f"{g.id} ({g.examples[0]})" if g.examples else g.id for g in table)
    return (f"step grammars known: {forms}. To add one, add an entry (a regular expression and what its groups "
            f"tell) to {TABLE.relative_to(TABLE.parents[4])} or to a JSON file named by {ENV}")
