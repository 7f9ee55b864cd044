"""The report's figures, and the shared history replayed: no false pulls on servers that never failed."""

import pytest

from emulator.replay.engine import Settings, replay
from emulator.replay.history import Fault, load_history
from emulator.replay.report import percentile, summarise, text

SHARED = "/work/shared/data/fault-traces/infinitehbd_fault_trace.json"


def test_percentile_nearest_rank():
    assert percentile([], 50) is None
    assert percentile([5, 1, 3, 2, 4], 50) == 3
    assert percentile(list(range(1, 21)), 95) == 19
    assert percentile([7], 95) == 7


def test_tiny_summary():
    s = Settings(nodes=1, devices_per_node=2, jobs=(1,), checkpoint_s=1000.0, restart_s=100.0,
                 person_delay_s=3600.0, horizon_s=10000.0)
    faults = [Fault("n1", 2500.0, 2500.0 + 86400, "GPU/GPU Lost")]
    out = summarise(replay(faults, s), faults, s)
    a, n = out["policies"]["asicmon"], out["policies"]["none"]
    assert a["device_hours_out"] == pytest.approx(1322 / 3600)
    assert a["ettr"] == pytest.approx(0.8678) and n["ettr"] == pytest.approx(0.2)
    assert a["detect_s_p95"] == 2 and n["detect_s_p95"] == 3600
    assert a["repairs"] == {"reboot_host: cured": 1} and a["escalations_to_person"] == 0
    assert n["escalations_to_person"] == 1
    assert a["gain_over_none_device_hours"] == pytest.approx((7500 - 1322) / 3600)
    assert a["by_class"]["GPU/GPU Lost"]["job_gpu_hours_lost"] == pytest.approx(1322 * 2 / 3600)
    assert "jobs' ETTR" in text(out)


def test_the_shared_history_pulls_nothing_on_servers_that_never_failed():
    faults = load_history(SHARED)
    s = Settings()
    out = summarise(replay(faults, s), faults, s)
    failed = {f.node for f in faults}
    assert len(failed) == 231  # 169 of the 400 never failed
    for name, p in out["policies"].items():
        assert p["false_pulls"] == 0, name
    a = out["policies"]["asicmon"]
    assert a["pulled_devices"] > 0  # it does pull: on servers the history says failed
    assert a["detect_s_p95_seen_by_monitor"] <= 60
    for kind, row in a["by_class"].items():  # every class a device monitor can see, within a minute
        if row["signal"] in ("xid", "metric", "hung"):
            assert row["detect_p95_s"] <= 60, kind
    assert a["faults_seen_by_monitor"] + a["faults_invisible_to_monitor"] == 584
    assert a["ettr"] > out["policies"]["none"]["ettr"]
    assert a["offenders"]["flagged"] == a["offenders"]["flagged_that_are_history_repeat_offenders"]


def test_in_service_by_day_by_hand():
    s = Settings(nodes=1, devices_per_node=2, jobs=(), horizon_s=1.5 * 86400)
    faults = [Fault("n1", 86400 - 3600, 86400 + 3600, "NIC/NIC Lost")]  # both devices, 1 h each side of midnight
    r = replay(faults, s, ["none"])["none"]
    # The person comes 4 h after the start: out 23:00 on day 0 until 03:00 on day 1.
    from emulator.replay.report import in_service_by_day

    assert in_service_by_day(r, 2, s.horizon_s) == [1 - 2 * 3600 / (2 * 86400), 1 - 2 * 3 * 3600 / (2 * 43200)]
