"""The emulator's driver errors: cascades written to the host's kernel log, the rung each
needs, the short diagnostic, and injection from the command line."""

import json

import pytest

from emulator import EmulatedHost, FleetConfig
from emulator.config import fleet_layout
from emulator.devices.driver_errors import DRIVER_FAULTS, SPARE_ROWS, bus_address
from tests.emulator.test_cli_settings import emulator

CFG = FleetConfig(seed=3, hosts=1, devices_per_host=4, types=("gpu", "inference"))


@pytest.fixture
def host():
    emu = EmulatedHost(CFG, fleet_layout(CFG)[0])
    emu.sync(10_000.0)
    emu.advance(10_000.0)
    return emu


def _serial(host, device_type):
    return next(d.serial for d in host.spec.devices if d.type == device_type)


def _codes(lines):
    return [line.split("): ")[1].split(",")[0] if "NVRM" in line else line.split("amdgpu: ")[1] for line in lines]


def test_a_gpu_that_falls_off_the_bus_stops_answering_and_only_a_host_reboot_brings_it_back(host):
    gpu = _serial(host, "gpu")
    host.inject_fault(gpu, "xid_79")
    (line,) = host.take_kernel_log()
    assert f"NVRM: Xid (PCI:{bus_address(host.spec.device(gpu).index)}): 79, pid=" in line
    assert "hang" in host.state(gpu).faults  # no answer from now on
    host.reboot(gpu)  # a device reset does not reach a GPU that is off the bus
    host.advance(10_100.0)
    assert host.diagnose(gpu) == (False, "diagnostic failed: hang, xid_79")
    host.reboot_host()
    host.advance(10_200.0)
    assert host.diagnose(gpu) == (True, "diagnostic passed")


def test_ecc_errors_remap_rows_until_the_spares_run_out(host):
    gpu = _serial(host, "gpu")
    for n in range(SPARE_ROWS + 1):
        host.inject_fault(gpu, "xid_48")
        host.advance(host.now + 5)
        lines = host.take_kernel_log()
        if n < SPARE_ROWS:
            assert _codes(lines) == ["48", "63"]
            host.reboot(gpu)
            host.advance(host.now + 100)
            assert host.diagnose(gpu)[0]
    assert _codes(lines) == ["48", "64"]  # past the spare rows: the remap fails
    host.reboot(gpu)
    host.reboot_host()
    host.advance(host.now + 100)
    assert host.diagnose(gpu) == (False, "diagnostic failed: xid_48")  # hardware: for inspection


def test_contained_vs_uncontained_and_application_faults(host):
    gpu = _serial(host, "gpu")
    host.inject_fault(gpu, "xid_94")
    host.take_kernel_log()
    assert not host.diagnose(gpu)[0]
    assert host.restart_workload(gpu) == ["xid_94"]  # contained: the application restarts
    assert host.diagnose(gpu)[0]
    host.inject_fault(gpu, "xid_95")
    assert len(host.take_kernel_log()) == 200  # a flood of identical lines
    assert host.restart_workload(gpu) == [] and not host.diagnose(gpu)[0]  # uncontained needs a reset
    host.reboot(gpu)
    host.advance(host.now + 100)
    assert host.diagnose(gpu)[0]
    host.inject_fault(gpu, "xid_43")  # the driver already dealt with it
    assert host.diagnose(gpu)[0] and "xid_43" not in host.state(gpu).faults


def test_gsp_timeouts_come_in_a_cascade_and_the_device_hangs_at_the_second(host):
    gpu = _serial(host, "gpu")
    host.inject_fault(gpu, "xid_119")
    assert _codes(host.take_kernel_log()) == ["119"] and "hang" not in host.state(gpu).faults
    host.advance(host.now + 10)
    assert _codes(host.take_kernel_log()) == ["119"] and "hang" in host.state(gpu).faults


def test_amd_like_devices_write_amdgpu_ras_lines(host):
    npu = _serial(host, "inference")
    host.inject_fault(npu, "amd_umc_ue")
    host.advance(host.now + 2)
    lines = host.take_kernel_log()
    assert "amdgpu 0000:" in lines[0] and "uncorrectable hardware errors detected in umc block" in lines[0]
    assert "Saved 1 bad pages" in lines[1]


@pytest.mark.slow  # runs the emulator's command line for every fault: seconds of CPU (make test runs it, make test-fast does not)
def test_every_driver_fault_is_injectable_from_the_command_line(tmp_path):
    layout = fleet_layout(FleetConfig(seed=5, hosts=1, devices_per_host=2, types=("gpu",)))
    serial = layout[0].devices[0].serial
    env = dict(FLEET_SEED="5", FLEET_HOSTS="1", FLEET_DEVICES_PER_HOST="2", FLEET_TYPES="gpu", EMULATOR_STATE_DIR=str(tmp_path))
    result = emulator("inject", serial, "xid_79", **env)
    assert result.returncode == 0, result.stderr
    state = json.loads((tmp_path / f"{layout[0].name}.json").read_text())
    assert "xid_79" in state["devices"][serial]["faults"] and "): 79, " in state["kernel_log"][0]
    assert "xid_79" in DRIVER_FAULTS and emulator("inject", serial, "xid_bogus", **env).returncode == 2
