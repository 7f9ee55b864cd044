"""A spec's simulator as the conformance kit's device: built from the spec's own lines, on
the kit's clock, and the zoo left as it was."""

from __future__ import annotations

from pathlib import Path

import pytest

from emulator.conformance import NoSimulator, simulated_device
from emulator.devices.zoo import DEVICE_TYPES

SPECS = Path(__file__).resolve().parents[2] / "fleet" / "asimov" / "specs"
T0 = 1_700_000_000.0


def test_the_device_reads_resets_and_puts_the_zoo_back(tmp_path):
    shipped = DEVICE_TYPES["gpu"]
    spec = tmp_path / "gpu.asimov"
    spec.write_text((SPECS / "gpu.asimov").read_text().replace("state tdp_w = 400.0", "state tdp_w = 700.0"))
    dut = simulated_device(spec)
    try:
        assert DEVICE_TYPES["gpu"].tdp_w == 700.0  # the double is the spec's, not the zoo's
        dut.advance(T0)
        dut.advance(T0 + 10)
        snap = dut.monitor.refresh(T0 + 10)
        assert snap["driver_status"] == "ok" and snap["device_model"] == "Emu G-80"
        assert dut.boots() == 0
        dut.monitor.control("reboot")
        assert dut.boots() == 1
        assert dut.diagnose() == (False, "device still resetting")
    finally:
        dut.close()
    assert DEVICE_TYPES["gpu"] is shipped


def test_a_driver_error_that_leaves_the_device_answering():
    dut = simulated_device(SPECS / "gpu.asimov")
    try:
        dut.advance(T0)
        fault, needs = dut.driver_error()
        assert fault == "xid_48" and needs == "reset_device"
        dut.advance(T0 + 5)
        assert any("Xid" in line and ": 48," in line for line in dut.kernel_lines())
    finally:
        dut.close()


def test_a_spec_without_state_has_no_simulator():
    with pytest.raises(NoSimulator, match="describes no simulator"):
        simulated_device(SPECS / "nvml.asimov")
    assert "nvml" not in DEVICE_TYPES
