"""The Asicmon counter catalogue: the counters every device type is read by, each with a unit
Asimov can check, a kind, and for state counters the values they may take."""

import pytest

from fleet.asicmon.catalogue import (
    ALWAYS_PRESENT,
    CATALOGUE,
    DRIVER_STATUSES,
    KINDS,
    RUNTIME_COUNTERS,
    CounterDef,
)
from fleet.asimov.checking.units import parse_unit


def test_a_counter_of_an_unknown_kind_is_refused():
    with pytest.raises(ValueError, match="counter widget: kind must be one of"):
        CounterDef("widget", "1", "histogram", "Widgets.")


def test_every_unit_is_one_asimov_checks_specs_against():
    for counter in CATALOGUE.values():
        assert counter.kind in KINDS, counter.name
        parse_unit(counter.unit)  # raises for a unit the checker would not know


def test_only_gauges_and_counters_are_numeric_and_only_state_counters_list_values():
    assert CATALOGUE["temperature_c"].is_numeric and CATALOGUE["energy_j_total"].is_numeric
    assert not CATALOGUE["device_model"].is_numeric and not CATALOGUE["driver_status"].is_numeric
    for counter in CATALOGUE.values():
        assert bool(counter.values) == (counter.kind == "state"), counter.name
    assert CATALOGUE["driver_status"].values == DRIVER_STATUSES


def test_every_rate_is_a_gauge_next_to_the_total_it_is_the_rate_of():
    rates = [name for name in CATALOGUE if name.endswith("_per_s")]
    assert rates
    for name in rates:
        total = CATALOGUE[name.removesuffix("_per_s") + "_total"]
        assert CATALOGUE[name].kind == "gauge" and total.kind == "counter"
        assert parse_unit(CATALOGUE[name].unit).same_dimension(
            parse_unit(total.unit) / parse_unit("s")
        )


def test_the_counters_every_snapshot_carries_and_the_runtime_sets_are_in_the_catalogue():
    assert set(ALWAYS_PRESENT) <= set(CATALOGUE)
    assert set(RUNTIME_COUNTERS) <= set(CATALOGUE)
    assert [c.name for c in CATALOGUE.values() if c.per_core] == ["core_utilization"]
