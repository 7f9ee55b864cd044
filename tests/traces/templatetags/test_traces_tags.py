"""The trace pages' filters: durations, microseconds, shares and sizes as people read them,
and the states' labels for the page script."""

import json

import pytest

from traces.templatetags.traces_tags import (
    bytes_human,
    duration,
    percent,
    trace_statuses_script,
    us_human,
)


@pytest.mark.parametrize(
    "value, text", [(None, "–"), (12.34, "12.3 µs"), (4560, "4.56 ms"), (1_230_000, "1.23 s")]
)
def test_microseconds_in_the_unit_their_size_calls_for(value, text):
    assert us_human(value) == text


def test_shares_sizes_and_missing_values():
    assert percent(0.1234) == "12.3%" and percent(None) == "–"
    assert bytes_human(None) == "0 B" and bytes_human(999) == "999 B"
    assert bytes_human(1500) == "1.5 KB" and bytes_human(2_500_000) == "2.5 MB"
    assert bytes_human(5e12) == "5000.0 GB"  # gigabytes are the largest unit
    assert duration(None) == "–" and duration("") == "–" and duration(65) != "–"


def test_the_state_labels_reach_the_page_as_json():
    html = str(trace_statuses_script())
    assert html.startswith('<script id="trace-statuses" type="application/json">')
    labels = json.loads(html.split(">", 1)[1].rsplit("</script>", 1)[0])
    assert labels["ready"] == "Ready" and labels["analysing"] == "Analysing"
