"""Every fault shows through Asicmon by its expected counters, and a reboot clears it."""

from __future__ import annotations

import time

import pytest

from emulator import FleetConfig
from fleet.hosts.emulated_monitors import HostMonitor

DAY = 86400.0
PEAK = DAY * 19675 + 0.80 * DAY  # evening: demand near its peak for every workload
NIGHT = DAY * 19675 + 0.30 * DAY  # demand near its trough
CFG = FleetConfig(seed=7, hosts=1, devices_per_host=3, hang_block_s=0.3, reboot_s=30.0)


def _run(hm: HostMonitor, start: float, seconds: float, step: float = 10.0) -> dict:
    t = start
    snaps = hm.poll(t)
    while t < start + seconds:
        t += step
        snaps = hm.poll(t)
    return snaps


@pytest.fixture
def hm(tmp_path):
    return HostMonitor.open(CFG, "host-00", state_dir=tmp_path, probe_timeout=0.1)


def _by_type(hm: HostMonitor) -> dict[str, str]:
    return {d.type: d.serial for d in hm.devices}


def _reboot_and_recover(
    hm: HostMonitor, serial: str, t: float, settle: float = 300.0
) -> tuple[dict, dict]:
    hm.reboot(serial)
    during = hm.poll(t + 10)[serial]
    after = _run(hm, t + 10 + CFG.reboot_s, settle)[serial]
    return during, after


@pytest.mark.parametrize("dtype", ["video", "inference", "gpu"])
def test_overheat_raises_temperature_throttles_and_reboot_clears_it(hm, dtype):
    serial = _by_type(hm)[dtype]
    base = _run(hm, PEAK, 300)[serial]
    assert base["throttle_reasons"] in ("none", "idle")
    hm.inject_fault(serial, "overheat")
    hot = _run(hm, PEAK + 310, 600)[serial]
    assert hot["temperature_c"] > base["temperature_c"] + 15, (
        base["temperature_c"],
        hot["temperature_c"],
    )
    assert "thermal" in hot["throttle_reasons"]
    assert hot["clock_mhz"] < hot["clock_max_mhz"]
    during, after = _reboot_and_recover(hm, serial, PEAK + 920, settle=600)
    assert during["driver_status"] == "rebooting"
    assert after["driver_status"] == "ok"
    assert after["temperature_c"] < base["temperature_c"] + 10
    assert after["throttle_reasons"] in ("none", "idle")


@pytest.mark.parametrize("dtype", ["video", "inference", "gpu"])
def test_hang_marks_driver_hung_and_reboot_clears_it(hm, dtype):
    serial = _by_type(hm)[dtype]
    _run(hm, PEAK, 20)
    hm.inject_fault(serial, "hang")
    snap = hm.poll(PEAK + 30)[serial]
    assert snap["driver_status"] == "hung"
    assert snap["temperature_c"] is None and snap["sample_ts"] == PEAK + 30
    hm.reboot(serial)
    time.sleep(CFG.hang_block_s + 0.05)  # let the blocked driver call time out
    # A device known hung is probed in the background and nobody waits for it: this poll
    # publishes what the probe blocked before the reboot found, and probes again.
    assert hm.poll(PEAK + 35)[serial]["driver_status"] == "hung"
    time.sleep(0.2)
    during = hm.poll(PEAK + 40)[serial]
    assert during["driver_status"] == "rebooting"
    after = _run(hm, PEAK + 40 + CFG.reboot_s, 20)[serial]
    assert after["driver_status"] == "ok" and after["temperature_c"] is not None


@pytest.mark.parametrize("dtype", ["video", "inference", "gpu"])
def test_memory_leak_eats_free_memory_until_reboot(hm, dtype):
    serial = _by_type(hm)[dtype]
    before = _run(hm, PEAK, 20)[serial]
    hm.inject_fault(serial, "memory_leak")
    leaking = _run(hm, PEAK + 30, 600)[serial]
    total = before["memory_total_bytes"]
    assert leaking["memory_free_bytes"] < before["memory_free_bytes"] - 0.2 * total
    hm.clear_fault(serial, "memory_leak")  # clearing stops the leak; the memory stays lost
    still = _run(hm, PEAK + 640, 20)[serial]
    assert still["memory_free_bytes"] < before["memory_free_bytes"] - 0.2 * total
    _, after = _reboot_and_recover(hm, serial, PEAK + 670, settle=20)
    assert after["memory_free_bytes"] > before["memory_free_bytes"] - 0.1 * total


@pytest.mark.parametrize("dtype", ["video", "inference", "gpu"])
def test_ecc_storm_shows_as_corrected_error_rate(hm, dtype):
    serial = _by_type(hm)[dtype]
    before = _run(hm, PEAK, 30)[serial]
    assert before["ecc_corrected_per_s"] < 1
    hm.inject_fault(serial, "ecc_storm")
    storm = _run(hm, PEAK + 40, 30)[serial]
    assert storm["ecc_corrected_per_s"] > 50
    assert storm["ecc_corrected_total"] > before["ecc_corrected_total"]
    _, after = _reboot_and_recover(hm, serial, PEAK + 80, settle=30)
    assert after["ecc_corrected_per_s"] < 1


@pytest.mark.parametrize("dtype", ["video", "inference", "gpu"])
def test_pcie_degraded_shows_as_narrow_link_and_errors(hm, dtype):
    serial = _by_type(hm)[dtype]
    before = _run(hm, PEAK, 20)[serial]
    assert before["pcie_link_status"] == "ok"
    hm.inject_fault(serial, "pcie_degraded")
    bad = _run(hm, PEAK + 30, 30)[serial]
    assert bad["pcie_link_status"] == "degraded"
    assert bad["pcie_link_width"] < before["pcie_link_width"]
    assert bad["pcie_errors_per_s"] > 1
    _, after = _reboot_and_recover(hm, serial, PEAK + 70, settle=30)
    assert after["pcie_link_status"] == "ok" and after["pcie_errors_per_s"] == 0


@pytest.mark.parametrize("dtype", ["video", "inference", "gpu"])
def test_core_stuck_pins_device_utilization(hm, dtype):
    serial = _by_type(hm)[dtype]
    before = _run(hm, NIGHT, 30)[serial]
    assert before["device_utilization"] < 0.6
    hm.inject_fault(serial, "core_stuck")
    stuck = _run(hm, NIGHT + 40, 30)[serial]
    assert stuck["device_utilization"] > 0.99
    if stuck["core_utilization"] is not None:  # per-core view where the driver has one
        cores = sorted(stuck["core_utilization"])
        assert cores[-1] > 0.99 and cores[len(cores) // 2] < 0.6
    _, after = _reboot_and_recover(hm, serial, NIGHT + 80, settle=30)
    assert after["device_utilization"] < 0.6


def test_persistent_fault_survives_reboot(hm):
    serial = _by_type(hm)["gpu"]
    _run(hm, PEAK, 20)
    hm.inject_fault(serial, "pcie_degraded", persistent=True)
    _, after = _reboot_and_recover(hm, serial, PEAK + 30, settle=20)
    assert after["pcie_link_status"] == "degraded"


def test_unknown_fault_and_unknown_device_are_rejected_without_change(hm):
    serial = hm.serials[0]
    with pytest.raises(ValueError, match="unknown fault"):
        hm.inject_fault(serial, "gremlins")
    with pytest.raises(KeyError, match="no device"):
        hm.inject_fault("NOPE-1", "hang")
    assert hm.faults(serial) == {}
