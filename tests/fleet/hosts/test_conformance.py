"""Real devices as the conformance kit's device: a device folder read through its files, an
NVIDIA GPU through NVML; their commands run only when asked for."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleet.asimov.interface.conform import conform, open_device

SPECS = Path(__file__).resolve().parents[3] / "fleet" / "asimov" / "specs"
FILES = {"name": "amdgpu", "temp1_input": "45000", "temp1_crit": "100000", "power1_average": "35000000",
         "power1_cap": "300000000", "device/gpu_busy_percent": "12", "device/mem_info_vram_used": str(2**30),
         "device/mem_info_vram_total": str(16 * 2**30), "device/reset": "0"}


def _folder(tmp_path: Path, **changes: str) -> Path:
    root = tmp_path / "hwmon0"
    for rel, text in {**FILES, **changes}.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text + "\n")
    return root


def _spec_with_reset(tmp_path: Path) -> Path:
    spec = tmp_path / "hwmon.asimov"
    spec.write_text((SPECS / "hwmon.asimov").read_text() + 'action reboot = write("device/reset", "1")\n')
    return spec


def test_a_device_folder_conforms_and_lacks_its_optional_counters_without_failing(tmp_path):
    report = conform(SPECS / "hwmon.asimov", f"files={_folder(tmp_path)}")
    assert report.passed, [c for c in report.failures()]
    rows = {(c.subject, c.check): c.detail for c in report.checks}
    assert rows[("temperature_c", "readable")] == "45 Cel"
    assert rows[("energy_j_total", "readable")] == "no value: this device does not tell"


def test_a_temperature_in_the_wrong_unit_is_caught_on_real_files(tmp_path):
    report = conform(SPECS / "hwmon.asimov", f"files={_folder(tmp_path, temp1_input='45000000')}")
    failed = {(c.subject, c.check): c.detail for c in report.failures()}
    assert failed == {("temperature_c", "range"): "4.5e+04 Cel outside -40..150 Cel"}


def test_commands_of_a_real_device_run_only_when_asked(tmp_path):
    folder, spec = _folder(tmp_path), _spec_with_reset(tmp_path)
    report = conform(spec, f"files={folder}")
    assert report.passed
    assert [(c.subject, c.check) for c in report.checks if c.area == "command"] == [("reboot", "not run")]
    assert (folder / "device/reset").read_text() == "0\n"
    report = conform(spec, f"files={folder},commands=0")
    assert (folder / "device/reset").read_text() == "1"  # the write went through ...
    failed = {(c.subject, c.check) for c in report.failures()}
    assert ("reboot", "effect seen") in failed  # ... but a plain file never reboots: no effect seen


def test_bad_device_arguments_are_clear(tmp_path):
    with pytest.raises(ValueError, match="expected the device's folder"):
        open_device(SPECS / "hwmon.asimov", f"files={tmp_path / 'missing'}")
    with pytest.raises(ValueError, match="unknown option 'reset'"):
        open_device(SPECS / "hwmon.asimov", f"files={tmp_path},reset")
    with pytest.raises(ValueError, match="commands='soon': expected a number of seconds"):
        open_device(SPECS / "hwmon.asimov", f"files={tmp_path},commands=soon")
    assert open_device(SPECS / "hwmon.asimov", f"files={tmp_path},commands").reboot_s == 60.0
    with pytest.raises(ValueError, match="expected sim, files, nvml or MODULE:FUNCTION"):
        open_device(SPECS / "hwmon.asimov", "gpu0")


def test_an_nvml_device_without_nvml_is_one_failing_row_not_a_traceback():
    pytest.importorskip("pynvml")
    dut = open_device(SPECS / "nvml.asimov", "nvml=0")
    answers = dut.monitor.refresh(0.0)["driver_status"] == "ok"
    report = conform(SPECS / "nvml.asimov", "nvml=0")
    if answers:  # a machine with a GPU: the real thing must conform (its commands not run)
        assert report.passed, report.failures()
    else:
        assert [(c.subject, c.check) for c in report.failures()][0] == ("driver_status", "readable")
        assert not any(c.area == "counter" and c.subject != "driver_status" for c in report.checks)
