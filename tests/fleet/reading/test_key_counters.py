"""The key counters live in one table (fleet.reading.key_counters) that the queries, the poll
message, the charts, the templates and the page JavaScript all read."""

import json
import re

import pytest

from fleet import events
from fleet.reading import key_counters
from fleet.reading.charts import counter_figure
from fleet.reading.key_counters import KEY_COUNTERS, KeyCounter

pytestmark = pytest.mark.django_db


def test_key_counters_format_by_their_table():
    by_name = {k.name: k for k in KEY_COUNTERS}
    assert by_name["device_utilization"].format(0.423) == "42%"
    assert by_name["temperature_c"].format(61.54) == "61.5 °C"
    assert by_name["power_w"].format(212.6) == "213 W"
    assert by_name["memory_used_bytes"].format(3 * 2**30) == "3.0 GiB"
    assert all(k.format(None) == "–" for k in KEY_COUNTERS)


def test_a_key_counter_must_be_in_the_catalogue():
    with pytest.raises(ValueError, match="not in the Asicmon catalogue"):
        KeyCounter("temprature_c", "Temperature", "°C", 1.0, 1, "#000")


def test_one_line_adds_a_key_counter_everywhere(client, viewer, polled_fleet, monkeypatch):
    clock = KeyCounter("clock_mhz", "Clock", "MHz", 1.0, 0, "#8a5cd1")
    monkeypatch.setattr(key_counters, "KEY_COUNTERS", (*KEY_COUNTERS, clock))
    client.force_login(viewer)

    fleet_page = client.get("/").content.decode()
    assert "<th class=\"num\">Clock</th>" in fleet_page
    cells = re.findall(r'data-field="clock_mhz">([^<]*)<', fleet_page)
    assert len(cells) == len(polled_fleet)
    assert all(re.fullmatch(r"\d+ MHz|–", c) for c in cells) and any(c != "–" for c in cells)

    table = re.search(r'<script id="key-counters" type="application/json">(.*?)</script>', fleet_page)
    assert [k["name"] for k in json.loads(table.group(1))][-1] == "clock_mhz"

    line = events.device_line(1, {"clock_mhz": 1410.0, "temperature_c": 50.0})
    assert line["counters"]["clock_mhz"] == 1410.0

    device_page = client.get(f"/devices/{polled_fleet[0].id}/")
    assert [f["counter"] for f in device_page.context["figures"]][-1] == "clock_mhz"
    assert counter_figure("clock_mhz", [(0.0, 1400.0)])["layout"]["title"]["text"] == "Clock (MHz)"
