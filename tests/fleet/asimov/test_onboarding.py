"""The tutorial in docs/asimov.md: a fourth device type, monitored with one spec, no other code."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from emulator import FleetConfig
from emulator.devices.drivers import DRIVERS
from emulator.devices.zoo import DEVICE_TYPES
from emulator.workloads.graph import COST_PROFILES
from fleet.hosts.emulated_monitors import HostMonitor

DOC = Path(__file__).resolve().parents[3] / "docs" / "asimov.md"
T0 = 1_700_000_000.0


def _block(tag: str) -> str:
    match = re.search(rf"```{tag} tutorial\n(.*?)```", DOC.read_text(), re.S)
    assert match, f"no ```{tag} tutorial block in {DOC}"
    return match.group(1)


@pytest.fixture
def npu_registered():
    exec(compile(_block("python"), str(DOC), "exec"), {"__name__": "tutorial"})
    yield
    DEVICE_TYPES.pop("npu", None)
    DRIVERS.pop("procfs", None)
    COST_PROFILES.pop("npu", None)


def test_onboarding_a_fourth_device_type_takes_one_spec(npu_registered, tmp_path):
    specs = tmp_path / "specs"
    specs.mkdir()
    (specs / "npu.asimov").write_text(_block("asimov"))
    cfg = FleetConfig(seed=1, hosts=1, devices_per_host=4, types=("npu", "video"))
    hm = HostMonitor.open(cfg, "host-00", state_dir=tmp_path / "state", spec_dirs=[specs])
    hm.poll(T0)
    snaps = hm.poll(T0 + 10)
    npus = [d.serial for d in hm.devices if d.type == "npu"]
    assert len(npus) == 2
    for serial in npus:
        snap = snaps[serial]
        assert snap["driver_status"] == "ok"
        assert snap["device_model"] == "Emu NPU-7"
        assert 0 < snap["device_utilization"] <= 1 and len(snap["core_utilization"]) == 2
        assert 30 < snap["temperature_c"] < 90
        assert snap["memory_used_bytes"] + snap["memory_free_bytes"] == snap["memory_total_bytes"]
    hm.inject_fault(npus[0], "hang")
    assert hm.poll(T0 + 20)[npus[0]]["driver_status"] == "hung"
