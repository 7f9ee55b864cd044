"""Parsing spec text: a typed tree for good syntax, and for bad syntax an error at the place
it went wrong that says what was expected there."""

import dataclasses

import pytest

from fleet.asimov.errors import AsimovError
from fleet.asimov.language import nodes
from fleet.asimov.language.parser import describe_expected, parse


def _error(text: str) -> tuple[int, int, str, str]:
    with pytest.raises(AsimovError) as exc:
        parse(text, "x.asimov")
    e = exc.value
    assert e.file == "x.asimov"
    return e.line, e.column, e.message, e.expected


def test_a_list_may_span_lines_inside_its_brackets_and_the_last_newline_is_optional():
    spec = parse("device x\nstats.core_utilization = [1,\n  2,\n  3]")
    device, stat = spec.statements
    assert isinstance(device, nodes.Device) and isinstance(stat, nodes.StatsAssign)
    assert [item.value for item in stat.value.items] == [1, 2, 3]


def test_an_unclosed_bracket_is_reported_where_it_opens():
    assert _error('device x\nt = file("t", int\nstats.a = 1\n') == (
        2,
        9,
        "'(' is never closed",
        "')'",
    )


def test_a_line_that_stops_early_points_just_after_its_last_character():
    assert _error("device x\nstats.a = 1 +\n") == (2, 14, "unexpected end of line", "an expression")
    assert _error("device\n") == (1, 7, "unexpected end of line", "a name")


def test_a_character_outside_the_language_is_named():
    line, column, message, _ = _error("device x\nstats.a = 1 $ 2\n")
    assert (line, column, message) == (2, 13, "unexpected character '$'")


def test_expected_tokens_are_described_in_words():
    assert describe_expected({"NAME", "NUMBER", "STRING"}) == "an expression"
    assert describe_expected({"RPAR"}) == "')'"
    assert describe_expected({"RPAR", "COMMA"}) == "')' or ','"



def _dump(value):
    """A tree as plain tuples, every field of every node (its span too): nodes compare by identity."""
    if dataclasses.is_dataclass(value):
        return type(value).__name__, tuple((f.name, _dump(getattr(value, f.name))) for f in dataclasses.fields(value))
    if isinstance(value, tuple):
        return tuple(_dump(v) for v in value)
    return value


def test_the_parser_s_tables_are_kept_under_var_and_a_kept_file_parses_as_a_fresh_parser(tmp_path, monkeypatch):
    from fleet.asimov.language import parser
    from fleet.asimov.loader import SPECS_DIR

    monkeypatch.setenv("ASICMON_VAR_DIR", str(tmp_path))
    kept = tmp_path / "cache" / "asimov-grammar.lark"
    text = (SPECS_DIR / "gpu.asimov").read_text()
    monkeypatch.setattr(parser, "_parser", parser._parser.__wrapped__)  # a parser made afresh at each call
    fresh = _dump(parse(text, "gpu.asimov"))  # builds the tables and keeps them
    assert kept.stat().st_size > 0 and len(dict(fresh[1])["statements"]) > 20
    made = kept.stat().st_mtime_ns
    assert _dump(parse(text, "gpu.asimov")) == fresh  # from the kept tables (not written again)
    assert kept.stat().st_mtime_ns == made
    kept.write_bytes(b"not lark's tables\n")  # a broken (or another grammar's) file is built again
    assert _dump(parse(text, "gpu.asimov")) == fresh
    assert kept.read_bytes() != b"not lark's tables\n"
