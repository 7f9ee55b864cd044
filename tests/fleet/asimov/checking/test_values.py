"""The arithmetic the checker does on units and constants, and how it names value types."""

import pytest

from fleet.asimov.checking.units import parse_unit
from fleet.asimov.checking.values import ANY, describe, fold, mul_units


def test_multiplying_and_dividing_units_combines_their_dimensions():
    assert mul_units(parse_unit("W"), parse_unit("s"), "*").same(parse_unit("J"))
    assert mul_units(parse_unit("B"), parse_unit("s"), "/").same(parse_unit("B/s"))
    # a plain number scales a value and keeps its unit
    assert mul_units(parse_unit("mW"), None, "*").same(parse_unit("mW"))
    assert mul_units(None, None, "/") is None


def test_an_unknown_unit_stays_unknown_and_a_remainder_keeps_the_left_unit():
    assert mul_units(ANY, parse_unit("W"), "*") is ANY
    assert mul_units(parse_unit("B"), None, "%") == parse_unit("B")
    assert mul_units(parse_unit("B"), parse_unit("B"), "//") is ANY


def test_constants_fold_like_python_and_refuse_huge_powers():
    assert fold("<<", 1, 3) == 8
    assert fold("//", 7, 2) == 3
    assert fold("**", 2, 10) == 1024
    with pytest.raises(ValueError, match="too large"):
        fold("**", 10, 10**6)
    with pytest.raises(ValueError):
        fold("@", 1, 2)
    with pytest.raises(ZeroDivisionError):
        fold("/", 1, 0)


def test_types_are_described_as_error_messages_say_them():
    assert describe("num") == "a number"
    assert describe("info") == "an info"
    assert describe("mystery") == "mystery"
