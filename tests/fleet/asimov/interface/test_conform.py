"""The conformance kit: every shipped spec's simulator passes; a spec with deliberate faults
has each fault named; the command line gives a table, JSON and exit statuses."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from emulator.devices.spec_types import spec_paths
from fleet.asimov.interface.conform import Report, _went_back, conform, open_device, run, table

ROOT = Path(__file__).resolve().parents[4]
SPECS = ROOT / "fleet" / "asimov" / "specs"
SIMULATED = spec_paths()


def _faulty(tmp_path: Path, *changes: tuple[str, str]) -> Path:
    text = (SPECS / "gpu.asimov").read_text()
    for old, new in changes:
        assert old in text
        text = text.replace(old, new)
    path = tmp_path / "gpu.asimov"
    path.write_text(text)
    return path


BACKWARDS = ('stats.energy_j_total = convert(energy, "J")', 'stats.energy_j_total = convert(10**12 - energy, "J")')
MILLIWATTS = ("power: mW = lib.nvmlDeviceGetPowerUsage(handle)", "power: W = lib.nvmlDeviceGetPowerUsage(handle)")
NO_RESET = ("action reboot = lib.emuDeviceReset(handle)", "action reboot = lib.nvmlDeviceGetName(handle)")


def test_the_shipped_simulators_are_the_four_emulated_types():
    assert sorted(p.stem for p in SIMULATED) == ["gpu", "inference", "mtx", "video"]


@pytest.mark.parametrize("path", SIMULATED, ids=lambda p: p.stem)
def test_every_shipped_specs_simulator_conforms(path):
    report = conform(path)
    assert report.passed, table(report)
    checks = {(c.subject, c.check) for c in report.checks}
    assert ("reboot", "effect seen") in checks and ("snapshot", "served from the cache") in checks
    assert ("energy_j_total", "monotonic") in checks and ("temperature_c", "range") in checks
    assert len(report.checks) > 50


def test_each_deliberate_fault_is_named(tmp_path):
    report = conform(_faulty(tmp_path, BACKWARDS, MILLIWATTS, NO_RESET))
    failed = {(c.subject, c.check): c.detail for c in report.failures()}
    assert set(failed) == {("energy_j_total", "monotonic"), ("power_w", "range"), ("reboot", "effect seen")}
    assert failed[("energy_j_total", "monotonic")].startswith("went back from ")
    assert "outside 0..5000 W" in failed[("power_w", "range")]
    assert failed[("reboot", "effect seen")].startswith("no effect: driver status ok, boots 0 -> 0")


def test_a_temperature_read_in_millidegrees_is_out_of_range(tmp_path):
    spec = _faulty(tmp_path, ("temp: C = lib.nvmlDeviceGetTemperature", "temp: mC = lib.nvmlDeviceGetTemperature"),
                   ("stats.temperature_c = temp", "stats.temperature_c = convert(temp, \"C\") * 1000000"))
    failed = {(c.subject, c.check) for c in conform(spec).failures()}
    assert ("temperature_c", "range") in failed


def test_a_wrap_at_the_hardware_width_is_not_going_back():
    assert not _went_back(2**32 - 5, 3)
    assert not _went_back(2**64 - 10**6, 10)
    assert _went_back(1000, 999)
    assert _went_back(2**32 - 5, 2**31)
    assert not _went_back(None, 5) and not _went_back(5, 5)


class _Leaky:
    """A device whose monitor reads the driver when its snapshot is read (a broken cache)."""

    def __init__(self, dut):
        self.dut, self.monitor = dut, dut.monitor
        self.advance, self.close = dut.advance, dut.close
        monitor, real = self.monitor, type(self.monitor).snapshot

        def snapshot():
            monitor.lib.nvmlSystemGetDriverVersion()
            return real(monitor)

        monitor.snapshot = snapshot


def test_a_snapshot_that_reads_the_driver_fails_the_cache_check():
    dut = _Leaky(open_device(SPECS / "gpu.asimov"))
    try:
        report = run(dut, "gpu.asimov")
    finally:
        dut.close()
    failed = {(c.subject, c.check): c.detail for c in report.failures()}
    assert failed == {("snapshot", "served from the cache"): "2 driver call(s) while reading the snapshot"}


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "fleet.asimov", "conform", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


@pytest.mark.slow  # runs the conformance command line several times: seconds of CPU (make test runs it, make test-fast does not)
def test_command_line_table_json_and_exit_statuses(tmp_path):
    good = _cli(str(SPECS / "video.asimov"))
    assert good.returncode == 0, good.stderr
    assert good.stdout.splitlines()[0] == f"conformance of {SPECS / 'video.asimov'} on sim"
    assert good.stdout.rstrip().endswith(" passed, 0 failed")
    bad = _cli(str(_faulty(tmp_path, NO_RESET)), "--json")
    assert bad.returncode == 1
    data = json.loads(bad.stdout)
    assert data["failed"] == 1 and not data["passed"]
    assert [c["check"] for c in data["checks"] if not c["passed"]] == ["effect seen"]
    none = _cli(str(SPECS / "nvml.asimov"))
    assert none.returncode == 2 and "describes no simulator" in none.stderr
    broken = tmp_path / "broken.asimov"
    broken.write_text("device broken\nstats.nope = 1\n")
    result = _cli(str(broken))
    assert result.returncode == 1 and f"{broken}:2:7: error: unknown counter" in result.stderr


def test_report_json_form():
    report = Report("x.asimov", "sim")
    report.add("counter", "power_w", "range", False, "9e9 W outside")
    assert report.as_dict() == {"spec": "x.asimov", "device": "sim", "passed": False, "failed": 1, "checks": [
        {"area": "counter", "subject": "power_w", "check": "range", "passed": False, "detail": "9e9 W outside"}]}


def test_every_check_a_report_makes_is_published(tmp_path):
    from fleet.asimov.interface.conform import CHECKS
    from fleet.asimov.interface.document import interface_md

    made = {c.check for p in (SPECS / "gpu.asimov", _faulty(tmp_path, NO_RESET)) for c in conform(p).checks}
    assert made <= set(CHECKS)
    text = interface_md()
    for check in CHECKS:
        assert f"| {check} |" in text
    assert "| `temperature_c` | -40 | 150 |" in text


def test_driver_errors_classified_by_the_wrong_catalogue_are_named(tmp_path):
    spec = _faulty(tmp_path, ("events nvidia_xid from emulator", "events amd_ras from emulator"))
    failed = {(c.subject, c.check): c.detail for c in conform(spec).failures()}
    assert failed == {("xid_48", "read and classified"):
                      "48 unknown to amd_ras, 63 unknown to amd_ras (the double says reset_device)"}


def test_the_counting_driver_counts_calls_and_passes_constants_and_exception_classes_through():
    from fleet.asimov.interface.conform import _Counting

    class Lib:
        class Error(Exception):
            pass

        LEVEL = 3

        def read(self, n):
            return n + 1

    lib = _Counting(Lib())
    assert lib.Error is Lib.Error and lib.LEVEL == 3
    assert lib.read(1) == 2 and lib.read(2) == 3
    assert lib.calls == 2
