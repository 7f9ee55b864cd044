"""A real Prometheus (Debian's package) scrapes /metrics from Daphne with the bearer token;
promtool checks and unit-tests the shipped alert rules; the Grafana dashboard's panels on
/metrics ask only for series it serves."""

import json
import re
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from fleet.polling import poller, snapshots
from tests.support.processes import Service, child_env, free_port, start_web

ROOT = Path(__file__).resolve().parents[3]
RULES = ROOT / "docs" / "prometheus" / "asicmon-alerts.yml"
DASHBOARD = ROOT / "docs" / "grafana" / "asicmon-fleet.json"
TOKEN = "scrape-secret-7f3a"


def poll_twice():
    """Rates (and so utilization, on most drivers) need a previous refresh."""
    for cycle in (poller.current_cycle() - 5.0, poller.current_cycle()):
        for shard in poller.shards():
            poller.poll_shard(shard, cycle)


def tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.fail(f"{name} is missing: `make prometheus-deps` (or .ci/run) installs Debian's prometheus package")
    return path


def query(base: str, expr: str) -> list[dict]:
    url = f"{base}/api/v1/query?{urllib.parse.urlencode({'query': expr})}"
    with urllib.request.urlopen(url, timeout=5) as response:
        body = json.load(response)
    assert body["status"] == "success", body
    return body["data"]["result"]


def wait_for(condition, timeout=60.0):
    deadline = time.time() + timeout
    last = None
    while time.time() < deadline:
        try:
            last = condition()
        except OSError:
            last = None
        if last:
            return last
        time.sleep(0.5)
    raise TimeoutError(f"condition never became true (last: {last!r})")


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
def test_a_real_prometheus_scrapes_the_fleet_utilization_with_the_token(seeded_fleet, tmp_path):
    prometheus = tool("prometheus")
    poll_twice()
    latest = snapshots.read_snapshots()
    web, base = start_web(child_env(METRICS_TOKEN=TOKEN))
    port = free_port()
    target = base.removeprefix("http://")
    config = tmp_path / "prometheus.yml"
    config.write_text(
        f"""
global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files: ["{RULES}"]
scrape_configs:
  - job_name: asicmon
    metrics_path: /metrics
    authorization: {{credentials: "{TOKEN}"}}
    static_configs: [{{targets: ["{target}"]}}]
  - job_name: asicmon-wrong-token
    metrics_path: /metrics
    authorization: {{credentials: "not-the-token"}}
    static_configs: [{{targets: ["{target}"]}}]
"""
    )
    server = Service(
        "prometheus",
        [prometheus, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'data'}",
         f"--web.listen-address=127.0.0.1:{port}"],
        child_env(),
    )
    api = f"http://127.0.0.1:{port}"
    try:
        try:
            result = wait_for(lambda: len(r := query(api, 'asicmon_device_utilization{job="asicmon"}')) == len(seeded_fleet) and r)
        except TimeoutError:
            with urllib.request.urlopen(f"{api}/api/v1/targets", timeout=5) as response:
                targets = json.load(response)["data"]["activeTargets"]
            errors = {t["labels"]["job"]: (t["health"], t["lastError"]) for t in targets}
            got = query(api, "asicmon_device_utilization")
            pytest.fail(f"Prometheus did not get the fleet: {errors}, {got}")
        for row in result:
            device = int(row["metric"]["device"])
            assert float(row["value"][1]) == pytest.approx(latest[device]["device_utilization"])
            assert row["metric"]["serial"] and row["metric"]["host"] and row["metric"]["model"]
        fleet_mean = query(api, 'avg(asicmon_device_utilization{job="asicmon"})')
        expected = sum(s["device_utilization"] for s in latest.values()) / len(latest)
        assert float(fleet_mean[0]["value"][1]) == pytest.approx(expected)
        gpus = query(api, 'DCGM_FI_DEV_GPU_UTIL{job="asicmon"}')
        assert len(gpus) == sum(d.device_type == "gpu" for d in seeded_fleet)
        targets = wait_for(lambda: len(u := query(api, "up")) == 2 and u)
        up = {r["metric"]["job"]: r["value"][1] for r in targets}
        assert up == {"asicmon": "1", "asicmon-wrong-token": "0"}  # the token is what lets it in
        with urllib.request.urlopen(f"{api}/api/v1/rules", timeout=5) as response:
            groups = json.load(response)["data"]["groups"]
        assert {rule["name"] for g in groups for rule in g["rules"]} >= {"AsicmonDeviceCritical", "AsicmonAutomationPaused"}
    finally:
        server.stop()
        web.stop()


def test_the_alert_rules_are_valid_and_fire_as_their_unit_tests_say():
    promtool = tool("promtool")
    check = subprocess.run([promtool, "check", "rules", str(RULES)], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    assert "SUCCESS: 7 rules found" in check.stdout
    unit = subprocess.run([promtool, "test", "rules", "asicmon-alerts.test.yml"], cwd=RULES.parent, capture_output=True, text=True)
    assert unit.returncode == 0, unit.stdout + unit.stderr


@pytest.mark.django_db
def test_the_grafana_dashboards_metrics_panels_ask_only_for_series_that_metrics_serves(client, settings, seeded_fleet):
    """The panels on the `metrics` datasource (a Prometheus scraping /metrics); those on the
    store are tested against the store (tests/scenarios/test_grafana_store.py)."""
    settings.METRICS_TOKEN = TOKEN
    poll_twice()
    served = set(re.findall(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)[{ ]", client.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"}).content.decode(), re.M))
    dashboard = json.loads(DASHBOARD.read_text())
    asked = set()
    for panel in dashboard["panels"]:
        if panel["datasource"]["uid"] != "${metrics}":
            continue
        for target in panel["targets"]:
            asked |= set(re.findall(r"\b(asicmon_[a-z_]+|DCGM_FI_[A-Z_]+)\b", target["expr"]))
    assert asked, "the dashboard queries nothing"
    # The leak gauge only exists while a device leaks: it is served by the leak rule, not here;
    # the driver-error series once a driver error is stored (tests/fleet/driver_errors).
    missing = asked - served - {"asicmon_memory_seconds_to_exhaustion", "asicmon_driver_errors_total",
                                "asicmon_driver_error_actions_total"}
    assert missing == set(), missing
