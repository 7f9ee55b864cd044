"""Units of the checks: names to dimensions and scales, products and quotients, conversions."""

import pytest

from fleet.asimov.checking.units import UnitError, parse_unit


def test_a_scaled_unit_converts_to_its_base_by_its_scale():
    assert parse_unit("mW").factor_to(parse_unit("W")) == pytest.approx(1e-3)
    assert parse_unit("GiB").factor_to(parse_unit("MiB")) == pytest.approx(1024)
    assert parse_unit("%").factor_to(parse_unit("1")) == pytest.approx(0.01)


def test_energy_over_time_is_power_and_bytes_over_time_a_rate():
    mj_per_s = parse_unit("mJ") / parse_unit("s")
    assert mj_per_s.same(parse_unit("mW"))
    assert str(mj_per_s) == "mW"
    assert parse_unit("B/s").same_dimension(parse_unit("MB") / parse_unit("ms"))
    assert parse_unit("W*s").same(parse_unit("J"))


def test_a_unit_keeps_the_text_it_was_written_as():
    assert str(parse_unit(" count/s ")) == "count/s"
    assert str(parse_unit("B") / parse_unit("s")) == "B/s"


def test_units_of_different_dimensions_do_not_convert():
    with pytest.raises(UnitError, match="cannot convert W to B"):
        parse_unit("W").factor_to(parse_unit("B"))
    assert not parse_unit("J").same_dimension(parse_unit("W"))


@pytest.mark.parametrize("text", ["furlong", "/s", "W/parsec", ""])
def test_an_unknown_or_empty_unit_is_an_error(text):
    with pytest.raises(UnitError, match="unknown unit"):
        parse_unit(text)
