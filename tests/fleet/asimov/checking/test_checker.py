"""The checker: one pass over a spec's statements that gathers every error, resolves names in
scope, and hands code generation a `CheckedSpec` of what it found."""

import pytest

from fleet.asimov.checking.checker import check
from fleet.asimov.checking.units import parse_unit
from fleet.asimov.errors import SpecErrors
from fleet.asimov.language import nodes
from fleet.asimov.language.parser import parse


def _check(*lines: str):
    text = "\n".join(lines) + "\n"
    return check(parse(text, "x.asimov"), text, "x.asimov")


def _errors(*lines: str) -> list[tuple[int, int, str]]:
    with pytest.raises(SpecErrors) as exc:
        _check("device x", *lines)
    return [(e.line, e.column, e.message) for e in exc.value.errors]


def test_a_checked_spec_knows_its_names_counters_and_each_expression_s_unit():
    checked = _check(
        "device board",
        "const LIMIT = 90",
        'p: mW = file("power", int)',
        'stats.power_w = convert(p, "W")',
    )
    assert checked.device == "board" and checked.filename == "x.asimov"
    assert checked.counters == ("power_w",)
    assert checked.uses_files and not checked.uses_lib
    defined = {s.name: s.kind for s in checked.symbols if s.kind != "special"}
    assert defined == {"LIMIT": "const", "p": "binding"}
    stat = checked.statements[-1]
    assert isinstance(stat, nodes.StatsAssign)
    assert checked.facts[stat.value].unit.same(parse_unit("W"))


def test_every_statement_s_error_is_reported_not_only_the_first():
    errors = _errors('t = file("t", int)', "stats.temperature_c = tt", "stats.power_w = q")
    assert [m for _, _, m in errors] == ["unknown name 'tt'", "unknown name 'q'"]


def test_a_name_is_defined_once_and_built_ins_cannot_be_redefined():
    assert _errors('t = file("t", int)', 't = file("u", int)', "stats.temperature_c = t") == [
        (3, 1, "'t' is already defined (line 2)")
    ]
    errors = _errors('max = file("t", int)', "stats.temperature_c = max")
    assert errors == [
        (2, 1, "'max' is a built-in function and cannot be redefined"),
        (3, 23, "'max' is a function"),
    ]


def test_a_once_statement_uses_only_what_does_not_change_between_refreshes():
    errors = _errors(
        "once h = lib.dev_open(index, out)",
        't = file("t", int)',
        "once k = t",
        "stats.temperature_c = t + h",
    )
    assert errors == [
        (
            4,
            10,
            "'t' is read every refresh; a once statement can only use once bindings and constants",
        )
    ]
    assert _errors("once n = now", 't = file("t", int)', "stats.temperature_c = t") == [
        (2, 10, "'now' changes every refresh and cannot be used in a once statement")
    ]


def test_an_unknown_name_suggests_a_close_one():
    with pytest.raises(SpecErrors) as exc:
        _check("device x", 'temp = file("t", int)', "stats.temperature_c = tmp")
    (error,) = exc.value.errors
    assert error.message == "unknown name 'tmp'" and "did you mean 'temp'?" in error.expected
