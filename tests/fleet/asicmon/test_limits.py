"""The health rules' thresholds: defaults every device type starts from, and a spec's
``health`` statements checked against their names and types."""

import dataclasses

import pytest

from fleet.asicmon.limits import DEFAULT_LIMITS, LIMIT_NAMES
from fleet.asimov.checking.checker import check
from fleet.asimov.compiler import compile_spec
from fleet.asimov.errors import SpecErrors
from fleet.asimov.language.parser import parse

BODY = 't = file("t", int)\nstats.temperature_c = t\n'


def test_the_defaults_are_ordered_and_cooling_is_off_until_a_type_sets_it():
    assert DEFAULT_LIMITS.temperature_warning_c < DEFAULT_LIMITS.temperature_critical_c
    assert DEFAULT_LIMITS.cooling_c_per_w is None
    assert "temperature_warning_c" in LIMIT_NAMES and "window_polls" in LIMIT_NAMES
    with pytest.raises(dataclasses.FrozenInstanceError):
        DEFAULT_LIMITS.temperature_warning_c = 10


def test_a_spec_sets_limits_by_name_and_whole_numbers_stay_whole():
    text = "device x\nhealth cooling_c_per_w = 1.2\nhealth window_polls = 12\n" + BODY
    assert dict(check(parse(text), text).health) == {"cooling_c_per_w": 1.2, "window_polls": 12}
    with pytest.raises(SpecErrors, match="health window_polls needs a whole number"):
        compile_spec("device x\nhealth window_polls = 2.5\n" + BODY)
