"""The helpers generated monitors call: parsing driver text, flags, clamps and means."""

import re

import pytest

from fleet.asimov import runtime


def test_a_value_with_a_unit_must_carry_the_unit_the_spec_expects():
    assert runtime.parse_unit("1234 mW\n", "mW") == 1234
    assert runtime.parse_unit("1.5 W", "W") == 1.5
    with pytest.raises(ValueError, match="expected a value in mW"):
        runtime.parse_unit("1234 W", "mW")


def test_fields_words_and_patterns_find_their_value_or_say_what_is_missing():
    text = "model: Emu-1\nbusy_us: 12 40 7\nclock 1500\n"
    assert runtime.field(text, "clock", int) == 1500
    assert runtime.field(text, "model", str) == "Emu-1"
    assert runtime.words(text, "busy_us", int) == [12, 40, 7]
    assert runtime.regex_field(re.compile(r"clock (\d+)"), text, int) == 1500
    with pytest.raises(ValueError, match="no field 'power'"):
        runtime.field(text, "power", int)
    with pytest.raises(ValueError, match="no line 'idle_us'"):
        runtime.words(text, "idle_us", int)
    with pytest.raises(ValueError, match="does not match"):
        runtime.regex_field(re.compile(r"power (\d+)"), text, int)


def test_flags_are_named_in_bit_order_once_each():
    names = {4: "power", 1: "thermal", 2: "thermal"}
    assert runtime.flags(7, names) == "thermal,power"
    assert runtime.flags(0, names) == "none"
    assert runtime.flags(8, names, "idle") == "idle"


def test_small_numeric_helpers():
    assert runtime.hex_int(" 0x1f\n") == 31
    assert runtime.text_value("  Emu-1\n") == "Emu-1"
    assert runtime.mean(v for v in (1, 2, 6)) == 3
    assert [runtime.clamp(x, 0, 10) for x in (-1, 5, 11)] == [0, 5, 10]


def test_a_driver_status_error_names_the_function_and_status():
    err = runtime.DriverStatusError(3, "nx_get_power")
    assert (err.status, err.function) == (3, "nx_get_power")
    assert str(err) == "nx_get_power returned status 3"
    out = runtime.Out()
    assert out.value is None
