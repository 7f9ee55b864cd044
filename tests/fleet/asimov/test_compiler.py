"""The Asimov compiler: the shipped specs, the CLI, generated code, and the real-hardware specs."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from emulator import EmulatedHost, FleetConfig
from fleet.asimov.compiler import compile_file, compile_spec
from fleet.asimov.errors import AsimovError, SpecErrors
from fleet.asimov.loader import SPECS_DIR, monitor_class
from fleet.hosts.local import FileRoot

ROOT = Path(__file__).resolve().parents[3]
T0 = 1_700_000_000.0
SPECS = sorted(SPECS_DIR.glob("*.asimov"))


def test_one_spec_per_emulated_type_and_two_for_real_hardware():
    assert {p.stem for p in SPECS} >= {"video", "inference", "gpu", "nvml", "hwmon"}


@pytest.mark.parametrize("path", SPECS, ids=lambda p: p.stem)
def test_shipped_specs_compile_to_valid_python(path):
    compiled = compile_file(path)
    ast.parse(compiled.code)
    assert compiled.counters
    assert "temperature_c" in compiled.counters


def _cli(*args):
    return subprocess.run(
        [sys.executable, "-m", "fleet.asimov", *args], cwd=ROOT, capture_output=True, text=True
    )


@pytest.mark.slow  # runs the compiler's command line several times: seconds of CPU (make test runs it, make test-fast does not)
def test_cli_compile_prints_the_module_and_check_only_checks(tmp_path):
    out = _cli("compile", str(SPECS_DIR / "video.asimov"))
    assert out.returncode == 0
    assert "class Monitor(_rt.DeviceMonitor):" in out.stdout
    ok = _cli("check", *map(str, SPECS))
    assert ok.returncode == 0 and ok.stdout.count(": ok") == len(SPECS)
    bad = tmp_path / "bad.asimov"
    bad.write_text('device bad\nt = file("t", int)\nstats.temperature = t\n')
    res = _cli("check", str(bad))
    assert res.returncode == 1 and res.stdout == ""
    assert f"{bad}:3:7: error: unknown counter 'stats.temperature'" in res.stderr
    assert "did you mean 'temperature_c'?" in res.stderr


def test_all_errors_of_a_spec_are_reported_in_order():
    with pytest.raises(SpecErrors) as exc:
        compile_spec(
            'device x\na = file("a", int)\nstats.nope = a\nstats.power_w = b\n', "x.asimov"
        )
    assert [(e.line, e.column) for e in exc.value.errors] == [(3, 7), (4, 17)]
    with pytest.raises(AsimovError):
        compile_spec("device\n", "x.asimov")


def test_units_convert_at_compile_time():
    spec = 'device x\np = file("p", unit("mW"))\ne: uJ = file("e", int)\nstats.power_w = convert(p, "W")\nstats.energy_j_total = convert(e, "J")\n'
    code = compile_spec(spec).code
    assert "* 0.001" in code and "* 1e-06" in code


def test_shifts_parse_and_are_not_comparisons():
    spec = 'device x\nconst BIT = 1 << 3\nconst HALF = 64 >> 1\nt = file("t", int)\nstats.temperature_c = t >> 1 if t < BIT else t\n'
    compiled = compile_spec(spec)
    assert "(b_t >> 1)" in compiled.code and "< 8" in compiled.code


def _emulated(dtype):
    host = EmulatedHost(FleetConfig(seed=9, hosts=1, devices_per_host=3), "host-00")
    host.sync(T0)
    serial = next(d.serial for d in host.spec.devices if d.type == dtype)
    return host, serial


def test_nvml_spec_works_against_the_emulated_gpu():
    host, serial = _emulated("gpu")
    binding = host.binding(serial)
    monitor = monitor_class("nvml")(index=binding.index, lib=binding.lib, serial=serial)
    monitor.refresh(T0)
    host.advance(T0 + 10)
    snap = monitor.refresh(T0 + 10)
    assert snap["driver_status"] == "ok"
    assert snap["device_model"] == "Emu G-80"
    assert 0 <= snap["device_utilization"] <= 1
    assert snap["memory_used_bytes"] + snap["memory_free_bytes"] == snap["memory_total_bytes"]
    assert snap["ecc_corrected_per_s"] is not None and snap["pcie_link_status"] == "ok"
    # optional calls give None where the library lacks them (as on boards without support)
    assert snap["temperature_limit_c"] is None


def test_nvml_spec_calls_only_functions_nvidia_ml_py_has():
    pynvml = pytest.importorskip("pynvml")
    code = compile_file(SPECS_DIR / "nvml.asimov").code
    for name in set(__import__("re").findall(r"lib\.(\w+)\(", code)):
        assert hasattr(pynvml, name), name


def _fake_hwmon(root: Path) -> Path:
    folder = root / "hwmon3"
    files = {
        "name": "amdgpu\n",
        "temp1_input": "54000\n",
        "temp1_crit": "100000\n",
        "power1_average": "87000000\n",
        "power1_cap": "250000000\n",
        "freq1_input": "1800000000\n",
        "device/gpu_busy_percent": "37\n",
        "device/mem_info_vram_total": "17163091968\n",
        "device/mem_info_vram_used": "1073741824\n",
        "device/current_link_width": "16\n",
        "device/max_link_width": "16\n",
    }
    for rel, text in files.items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_text(text)
    return folder


def test_hwmon_spec_reads_real_files(tmp_path):
    folder = _fake_hwmon(tmp_path)
    monitor = monitor_class("hwmon")(files=FileRoot(folder))
    snap = monitor.refresh(T0)
    assert snap["driver_status"] == "ok"
    assert snap["device_model"] == "amdgpu"
    assert snap["temperature_c"] == pytest.approx(54.0)
    assert snap["power_w"] == pytest.approx(87.0)
    assert snap["clock_mhz"] == pytest.approx(1800.0)
    assert snap["device_utilization"] == pytest.approx(0.37)
    assert snap["memory_free_bytes"] == 17163091968 - 1073741824
    assert snap["energy_j_total"] is None  # this chip has no energy counter
    (folder / "temp1_input").unlink()
    assert monitor.refresh(T0 + 1)["driver_status"] == "error"


def test_hwmon_spec_on_this_machine_if_it_has_sensors():
    from fleet.hosts.local import hwmon_devices

    devices = hwmon_devices("this-host")
    if not devices:
        pytest.skip("no /sys/class/hwmon sensors here")
    for device in devices:
        assert device.monitor.refresh()["driver_status"] in ("ok", "error")
