"""The three driver interfaces really differ, and format values as drivers do."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from emulator import EmulatedHost, FleetConfig, fleet_layout
from emulator.devices.drivers import clib, nvml
from fleet.asimov.runtime import Out

T0 = 1_700_000_000.0
ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def host():
    h = EmulatedHost(FleetConfig(seed=2, hosts=1, devices_per_host=3), "host-00")
    h.sync(T0)
    h.advance(T0 + 60)
    return h


def _serial(host, dtype):
    return next(d.serial for d in host.spec.devices if d.type == dtype)


def test_layout_is_deterministic_and_mixes_types():
    cfg = FleetConfig(seed=42, hosts=4, devices_per_host=8)
    a, b = fleet_layout(cfg), fleet_layout(cfg)
    assert a == b
    assert [h.name for h in a] == ["host-00", "host-01", "host-02", "host-03"]
    for h in a:
        assert {d.type for d in h.devices} == {"video", "inference", "gpu"}
        assert all(d.host == h.name for d in h.devices)
    serials = [d.serial for h in a for d in h.devices]
    assert len(set(serials)) == len(serials)
    assert fleet_layout(FleetConfig(seed=43, hosts=4, devices_per_host=8)) != a


def test_sysfs_values_are_formatted_like_a_kernel_driver(host, tmp_path):
    files = host.binding(_serial(host, "video")).files
    assert re.fullmatch(r"\d+ mW\n", files.read_text("power"))
    assert re.fullmatch(r"0x[0-9a-f]{8}\n", files.read_text("throttle_status"))
    assert re.fullmatch(r"total \d+ used \d+ free \d+\n", files.read_text("mem_info"))
    assert files.read_text("pcie/current_link_speed") == "8.0 GT/s PCIe\n"
    assert "TOTAL_ERR_COR" in files.read_text("pcie/aer_dev_correctable")
    with pytest.raises(FileNotFoundError):
        files.read_text("nope")
    folder = files.materialise(tmp_path)
    assert (folder / "hwmon" / "temp1_input").read_text() == files.read_text("hwmon/temp1_input")


def test_clib_returns_status_codes_and_fills_out_parameters(host):
    b = host.binding(_serial(host, "inference"))
    lib, h, t = b.lib, Out(), Out()
    assert lib.nx_open(b.index, h) == clib.NX_OK
    assert lib.nx_get_temperature(h.value, clib.NX_SENSOR_DIE, t) == clib.NX_OK
    assert isinstance(t.value, int) and 2000 < t.value < 15000  # centidegrees
    assert lib.nx_get_temperature(h.value, 9, t) == clib.NX_ERR_INVALID_ARG
    assert lib.nx_open(99, h) == clib.NX_ERR_NO_DEVICE
    a, tot = Out(), Out()
    assert lib.nx_get_core_cycles(lib.nx_open(b.index, h) or h.value, 0, a, tot) == clib.NX_OK
    assert 0 <= a.value < 2**48


def test_nvml_shape_matches_nvidia_ml_py(host):
    pynvml = pytest.importorskip("pynvml")
    b = host.binding(_serial(host, "gpu"))
    nv = b.lib
    with pytest.raises(nvml.NVMLError) as err:
        nv.nvmlDeviceGetCount()
    assert err.value.value == pynvml.NVML_ERROR_UNINITIALIZED
    nv.nvmlInit()
    handle = nv.nvmlDeviceGetHandleByIndex(b.index)
    mem = nv.nvmlDeviceGetMemoryInfo(handle)
    assert mem.used + mem.free == mem.total
    assert 0 <= nv.nvmlDeviceGetUtilizationRates(handle).gpu <= 100
    for name in dir(nv):
        if (
            name.startswith("nvml")
            and callable(getattr(nv, name))
            and not name.startswith("nvmlClocks")
        ):
            assert hasattr(pynvml, name), name
        if name.startswith("NVML_"):
            assert getattr(pynvml, name) == getattr(nv, name), name


def test_hang_blocks_then_times_out_and_reboot_takes_the_device_away(host):
    host.cfg = FleetConfig(seed=2, hosts=1, devices_per_host=3, hang_block_s=0.05)
    files = host.binding(_serial(host, "video")).files
    host.inject_fault(_serial(host, "video"), "hang")
    with pytest.raises(TimeoutError):
        files.read_text("power")
    host.reboot(_serial(host, "video"))
    with pytest.raises(OSError, match="no such device"):
        files.read_text("power")
    host.advance(T0 + 60 + host.cfg.reboot_s + 1)
    assert files.read_text("power").endswith(" mW\n")


@pytest.mark.slow  # runs the emulator's command line several times: seconds of CPU (make test runs it, make test-fast does not)
def test_cli_lists_shows_and_injects(tmp_path):
    def cli(*args):
        return subprocess.run(
            [sys.executable, "-m", "emulator", "--hosts", "1", "--state-dir", str(tmp_path), *args],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout

    listing = cli("list")
    serial = re.search(r"(EVT-\S+)", listing).group(1)
    assert "host-00" in listing
    assert "power" in cli("show", serial)
    assert "injected overheat" in cli("inject", serial, "overheat")
    assert "faults: overheat" in cli("show", serial)
