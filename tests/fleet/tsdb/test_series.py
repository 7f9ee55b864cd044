"""What the store holds: series names from catalogue counters, the labels of a device, the
installation's extra labels (TSDB_LABELS), and PromQL selectors built from them."""

import pytest

from fleet.asicmon import CATALOGUE
from fleet.tsdb.series import (
    DeviceKey,
    metric_name,
    parse_labels,
    recording_rules,
    selector,
    series_counters,
    series_name,
)


def test_counter_names_become_prometheus_names_with_their_units_spelled_out():
    assert metric_name("temperature_c") == "asicmon_temperature_c"
    assert metric_name("ecc_corrected_per_s") == "asicmon_ecc_corrected_per_second"
    assert metric_name("probe_duration_s") == "asicmon_probe_duration_seconds"
    assert metric_name("core_count") == "asicmon_cores"  # _count would read as a histogram's


def test_only_numeric_whole_device_counters_get_a_series():
    counters = dict(series_counters())
    assert "temperature_c" in counters
    assert all(CATALOGUE[c].is_numeric and not CATALOGUE[c].per_core for c in counters)
    assert "device_model" not in counters
    with pytest.raises(KeyError):
        series_name("device_model")


def test_a_device_is_labelled_by_host_id_serial_type_and_model_and_as_dcgm_labels_it():
    key = DeviceKey("host-01", 7, "GPU-abc", "gpu", "Emu G-80", index=2)
    assert key.labels() == {
        "host": "host-01",
        "device": "7",
        "serial": "GPU-abc",
        "type": "gpu",
        "model": "Emu G-80",
    }
    assert key.dcgm_labels()["device"] == "nvidia2" and key.dcgm_labels()["UUID"] == "GPU-abc"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("site", "'site' is not name=value"),
        ("site=", "'site=' is not name=value"),
        ("1site=a", "'1site' is not a label name"),
        ("__name__=x", "'__name__' is not a label name"),
        ("host=a", "'host' is a label Asicmon writes itself"),
        ("site=a,site=b", "'site' is given twice"),
    ],
)
def test_extra_labels_that_cannot_be_written_are_refused_with_the_reason(text, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        parse_labels(text)


def test_selectors_escape_values_and_carry_the_extra_labels():
    assert parse_labels(" site = lab , rack=r1 ,") == (("site", "lab"), ("rack", "r1"))
    assert selector("m", extra="site=lab", host='a"b\\c') == 'm{host="a\\"b\\\\c",site="lab"}'
    assert selector("m", extra="") == "m{}"


def test_recording_rules_aggregate_by_type_and_the_extra_labels():
    rules = recording_rules("site=lab")
    assert "record: asicmon:power_w:sum_by_type" in rules
    assert 'sum by (type, site) (asicmon_power_w{site="lab"})' in rules
