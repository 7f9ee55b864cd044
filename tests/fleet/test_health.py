"""Health rules over snapshots (pure functions), and the emulator's faults seen through them."""

import pytest

from fleet.choices import Health
from fleet.health import assess_with_reasons

NOW = 1_000_000.0


def snap(**counters):
    return {"sample_ts": NOW - 1, "driver_status": "ok", "temperature_c": 50.0, **counters}


@pytest.mark.parametrize(
    ("snapshot", "health", "reason"),
    [
        (snap(), Health.HEALTHY, None),
        (None, Health.UNKNOWN, "never polled"),
        (snap(sample_ts=NOW - 60), Health.UNKNOWN, "no data for 60 s"),
        (snap(driver_status="hung"), Health.CRITICAL, "driver hung"),
        (snap(driver_status="rebooting"), Health.WARNING, "rebooting"),
        (snap(temperature_c=88.0), Health.WARNING, "temperature 88 °C"),
        (snap(temperature_c=97.0), Health.CRITICAL, "temperature 97 °C"),
        (snap(throttle_reasons="thermal,power"), Health.WARNING, "thermal throttling"),
        (snap(throttle_reasons="power"), Health.HEALTHY, None),
        (snap(pcie_link_status="degraded"), Health.WARNING, "PCIe link degraded"),
        (snap(ecc_corrected_per_s=250.0), Health.WARNING, "250 corrected ECC errors/s"),
    ],
)
def test_rules(snapshot, health, reason):
    result = assess_with_reasons(snapshot, now=NOW, poll_interval=5.0)
    assert result.health == health
    if reason:
        assert reason in result.reasons
    else:
        assert result.reasons == []


def test_the_worst_rule_wins_and_every_reason_is_kept():
    result = assess_with_reasons(
        snap(driver_status="hung", temperature_c=90.0, pcie_link_status="degraded"), now=NOW, poll_interval=5.0
    )
    assert result.health == Health.CRITICAL
    assert result.reasons == ["driver hung", "temperature 90 °C", "PCIe link degraded"]


@pytest.mark.parametrize(
    ("fault", "health"),
    [("hang", Health.CRITICAL), ("overheat", Health.WARNING), ("pcie_degraded", Health.WARNING), ("ecc_storm", Health.WARNING)],
)
def test_injected_faults_show_as_unhealthy(tmp_path, fault, health):
    from emulator import FleetConfig
    from fleet.asicmon import HostMonitor

    cfg = FleetConfig(seed=5, hosts=1, devices_per_host=3, types=("video", "inference", "gpu"))
    monitor = HostMonitor.open(cfg, "host-00", state_dir=tmp_path, probe_timeout=0.2)
    t = 86400.0 * 19675.8  # an evening: demand near its peak, so heat builds up (fixed, not the clock)
    monitor.poll(now=t)
    serials = monitor.serials
    for serial in serials:
        monitor.inject_fault(serial, fault)
    for step in range(1, 31):  # let heat build up over 5 simulated minutes
        snapshots = monitor.poll(now=t + 10.0 * step)
    for serial in serials:
        result = assess_with_reasons(snapshots[serial], now=t + 300.0, poll_interval=10.0)
        assert result.health == health, (serial, fault, result.reasons)
    # A healthy neighbour stays healthy.
    assert assess_with_reasons(snap(), now=NOW, poll_interval=5.0).health == Health.HEALTHY
