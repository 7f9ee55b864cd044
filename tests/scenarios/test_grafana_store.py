"""The Grafana dashboard (docs/grafana/asicmon-fleet.json) reads the device counters from the
time-series store: each PromQL of its panels and variables on the store returns data from a
store holding the cycles a poll wrote (VictoriaMetrics, and Prometheus taking remote writes),
with the dashboard's variables set as Grafana sets them for "All"."""

from __future__ import annotations

import json
import re
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from fleet.polling import poller
from tests.support.tsdb import flush

DASHBOARD = Path(__file__).resolve().parents[2] / "docs" / "grafana" / "asicmon-fleet.json"
ALL = {"$host": ".*", "$type": ".*", "$__interval": "1m"}  # what Grafana puts in for "All", an interval

pytestmark = pytest.mark.django_db


def store_queries() -> list[tuple[str, str]]:
    """(panel title, PromQL) of every target on the store's datasource, variables filled in."""
    dashboard = json.loads(DASHBOARD.read_text())
    found = []
    for panel in dashboard["panels"]:
        if panel["datasource"]["uid"] == "${store}":
            for target in panel["targets"]:
                expr = target["expr"]
                for name, value in ALL.items():
                    expr = expr.replace(name, value)
                found.append((panel["title"], expr))
    return found


def label_queries() -> list[tuple[str, str]]:
    """(label, series) of the dashboard's label_values() variables, all on the store."""
    dashboard = json.loads(DASHBOARD.read_text())
    out = []
    for variable in dashboard["templating"]["list"]:
        if variable["type"] == "query":
            assert variable["datasource"]["uid"] == "${store}", variable["name"]
            series, label = re.fullmatch(r"label_values\((\w+), (\w+)\)", variable["definition"]).groups()
            out.append((label, series))
    return out


def get(url: str, path: str, **params: str):
    query = urllib.parse.urlencode({name.replace("match", "match[]"): value for name, value in params.items()})
    with urllib.request.urlopen(f"{url}/api/v1/{path}?{query}", timeout=10) as answer:
        body = json.load(answer)
    assert body["status"] == "success", body
    return body["data"]


def check_dashboard(store, seeded_fleet) -> None:
    cycle = poller.current_cycle()
    for at in (cycle - 5.0, cycle):  # two cycles: the per-second rates need a previous refresh
        for shard in poller.shards():
            poller.poll_shard(shard, at)
    flush(newest=cycle, url=store.url)
    queries = store_queries()
    assert len(queries) >= 8
    for title, expr in queries:
        result = get(store.url, "query", query=expr, time=str(cycle))["result"]
        assert result, f"{title}: {expr} returned nothing"
    hosts = {d.host.name for d in seeded_fleet}
    for label, series in label_queries():
        values = get(store.url, f"label/{label}/values", match=series, start=str(cycle - 60), end=str(cycle))
        assert set(values) == (hosts if label == "host" else {d.device_type for d in seeded_fleet})
    temperature = get(store.url, "query", query='asicmon_temperature_c{host=~".*",type=~".*"}', time=str(cycle))
    assert len(temperature["result"]) == len(seeded_fleet)  # every device of the fleet, each its own line


@pytest.mark.django_db(transaction=True)
def test_the_dashboards_promql_returns_data_from_victoria_metrics(victoria_metrics, seeded_fleet):
    check_dashboard(victoria_metrics, seeded_fleet)


@pytest.mark.django_db(transaction=True)
def test_the_dashboards_promql_returns_data_from_prometheus(prometheus_store, seeded_fleet):
    check_dashboard(prometheus_store, seeded_fleet)
