"""The fleet pages' template tags: counter values for tables, values in units people read,
and a counter a driver does not report told apart from one never read."""

import pytest
from django.template import Context, Template

from fleet.reading.key_counters import NOT_REPORTED
from fleet.templatetags.fleet_tags import counter, counter_value, human


@pytest.mark.parametrize(
    ("value", "shown"),
    [(None, "–"), (0.30195473427, "0.302"), ([0.5, 0.25], "0.5, 0.25"), (1400, 1400), ("ok", "ok")],
)
def test_counter_values_are_shown_readably(value, shown):
    assert counter_value(value) == shown


@pytest.mark.parametrize(
    ("value", "unit", "shown"),
    [
        (5322227914, "B", "5.0 GiB"),
        (512, "B", "512 B"),
        (3 * (1 << 20), "B/s", "3.0 MiB/s"),
        (0.371, "1", "37.1 %"),
        (54.04, "C", "54.0 °C"),
        (1500.0, "W", "1.5k W"),
        (0.0042, "s", "4.2 ms"),
        (12.0, "s", "12.0 s"),
        (2_500_000, "count/s", "2.5M/s"),
        ([1024, 2048], "B", "1.0 KiB, 2.0 KiB"),
        (None, "W", "–"),
        (True, "1", "True"),
        ("degraded", "", "degraded"),
    ],
)
def test_values_are_scaled_into_the_units_people_read(value, unit, shown):
    assert human(value, unit) == shown


def test_a_counter_the_driver_left_out_is_not_reported_and_one_never_read_is_blank():
    answered = {"driver_status": "ok", "power_w": 80.0}
    assert counter(answered, "power_w") == 80.0
    assert counter(answered, "clock_mhz") == NOT_REPORTED
    assert counter({"driver_status": "error"}, "clock_mhz") is None
    assert counter(None, "clock_mhz") is None
    assert (
        human(NOT_REPORTED, "MHz") == NOT_REPORTED and counter_value(NOT_REPORTED) == NOT_REPORTED
    )


def test_the_filters_work_in_a_template():
    html = Template("{% load fleet_tags %}{{ s|counter:'memory_used_bytes'|human:'B' }}").render(
        Context({"s": {"driver_status": "ok", "memory_used_bytes": 1 << 30}})
    )
    assert html == "1.0 GiB"
