"""Every catalogue counter has its names elsewhere (a row of the mapping table)."""

from __future__ import annotations

import re

from fleet.asicmon.catalogue import CATALOGUE, CounterDef
from fleet.asicmon.mappings import MAPPINGS, missing_mappings, ucum


def test_every_counter_has_a_row_and_no_row_is_left_over():
    assert missing_mappings() == []
    assert set(MAPPINGS) == set(CATALOGUE)


def test_a_counter_added_without_its_row_is_named():
    added = dict(CATALOGUE, widget_total=CounterDef("widget_total", "count", "counter", "Widgets."))
    assert missing_mappings(added) == ["widget_total"]


def test_units_are_ucum():
    assert ucum("C") == "Cel" and ucum("B") == "By" and ucum("count/s") == "{count}/s" and ucum("W") == "W"
    for c in CATALOGUE.values():
        assert re.fullmatch(r"[A-Za-z0-9{}/._]+", ucum(c.unit)), c.name
        assert ucum(c.unit) not in ("C", "B", "count"), c.name


def test_opentelemetry_names_are_hw_metrics_and_gpu_ones_say_so():
    named = {n: m for n, m in MAPPINGS.items() if m.otel}
    assert MAPPINGS["device_utilization"].otel == "hw.gpu.utilization"
    assert MAPPINGS["memory_used_bytes"].otel == "hw.gpu.memory.usage"
    assert MAPPINGS["memory_total_bytes"].otel == "hw.gpu.memory.limit"
    assert MAPPINGS["ecc_uncorrected_total"].otel_attributes["hw.type"] == "gpu"
    for name, m in named.items():
        assert m.otel.startswith("hw."), name
        if m.otel.startswith("hw.errors") or m.otel in ("hw.power", "hw.energy"):
            assert m.otel_attributes.get("hw.type") == "gpu", name
