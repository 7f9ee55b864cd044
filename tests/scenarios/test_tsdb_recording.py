"""Fleet-wide aggregates recorded by the store's rule engine: the rules file (the same for
vmalert and Prometheus), and vmalert recording them into a real VictoriaMetrics."""

import shutil
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

from dashboard.backing_services import vmalert_argv
from fleet import tsdb
from fleet.tsdb.series import DeviceKey, recording_rules, selector
from fleet.tsdb.writes import Encoder
from tests.support.processes import Service
from tests.support.tsdb import flush, free_port

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "docs" / "prometheus" / "asicmon-recording.yml"


def test_the_shipped_rules_file_is_the_one_the_code_makes_and_prometheus_accepts_it():
    assert RULES.read_text() == recording_rules("")
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.fail("promtool is missing: `make prometheus-deps` (or .ci/run) installs Debian's prometheus package")
    checked = subprocess.run([promtool, "check", "rules", str(RULES)], capture_output=True, text=True)
    assert checked.returncode == 0 and "SUCCESS: 4 rules found" in checked.stdout, checked.stdout + checked.stderr


def test_the_rules_keep_the_installations_labels():
    rules = recording_rules("site=lab 1")
    assert "quantile by (type, site) (0.95, asicmon_temperature_c{site=\"lab 1\"})" in rules


@pytest.mark.django_db(transaction=True)
def test_vmalert_records_the_p95_temperature_by_type_as_the_store_computes_it(victoria_metrics, settings, tmp_path):
    rules = tmp_path / "rules.yml"
    rules.write_text(recording_rules(settings.TSDB_LABELS))
    temperatures = {"gpu": [40.0 + n for n in range(20)], "video": [30.0 + 2 * n for n in range(10)]}
    keyed = [(DeviceKey("host-r", 1000 * i + n, f"R-{i}-{n}", kind, "M"), {"temperature_c": value})
             for i, (kind, values) in enumerate(temperatures.items()) for n, value in enumerate(values)]
    encoder = Encoder(dcgm=False)
    stop_at = time.time() + 60
    argv = vmalert_argv(rules, victoria_metrics.url, victoria_metrics.url, 1, free_port())
    assert argv is not None, "vmalert is missing: Debian's victoria-metrics package ships it"
    recorder = Service("vmalert", argv, {"PATH": "/usr/bin:/bin"})
    try:
        recorded = []
        while not recorded and time.time() < stop_at:
            now = time.time()
            for batch in encoder.batches(now, "test", keyed, settings.TSDB_LABELS):
                tsdb.client().write(batch.body)
            time.sleep(1)
            flush()
            recorded = tsdb.client().query(selector("asicmon:temperature_c:p95_by_type"))
    finally:
        recorder.stop()
    assert recorded, recorder.output()
    got = {s.labels["type"]: s.points[0][1] for s in recorded}
    assert got == {kind: pytest.approx(float(np.percentile(values, 95))) for kind, values in temperatures.items()}
    assert all(s.labels["asicmon_test"] == settings.TSDB_LABELS.split("=")[1] for s in recorded)
