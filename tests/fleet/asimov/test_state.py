"""A spec's device double: ``state`` and ``fault`` lines checked with positions, compiled
into the fields and fault numbers the emulator runs (emulator.devices.spec_types)."""

from __future__ import annotations

import re

import pytest

from emulator.devices.device_type import FAULTS
from emulator.devices.drivers import DRIVERS
from emulator.devices.spec_types import device_type_from_spec
from emulator.workloads.graph import WORKLOADS
from fleet.asimov.compiler import check_spec, compile_spec
from fleet.asimov.loader import SPECS_DIR, module_from_compiled
from fleet.asimov.state import DRIVER_INTERFACES, FAULT_EFFECTS, FIELDS
from fleet.asimov.state import WORKLOADS as SPEC_WORKLOADS

VIDEO = (SPECS_DIR / "video.asimov").read_text()
MONITOR = re.split(r"\n# the emulated device", VIDEO)[0] + "\n"  # the spec without its double


def test_the_checker_knows_what_the_emulator_runs():
    assert set(DRIVER_INTERFACES) == set(DRIVERS)
    assert set(SPEC_WORKLOADS) == set(WORKLOADS)
    assert tuple(FAULT_EFFECTS) == FAULTS


def test_a_spec_compiles_to_its_double():
    compiled = compile_spec(VIDEO, "video.asimov")
    dtype = device_type_from_spec(compiled)
    assert (dtype.name, dtype.driver, dtype.cores, dtype.memory_bytes) == ("video", "sysfs", 4, 8 << 30)
    assert dtype.firmware["2.1"] == "3.2.4" and dtype.faults["ecc_storm"] == (150.0, 0.2)
    assert compile_spec(MONITOR, "video.asimov").state == {}  # a monitor alone has no double
    monitor = module_from_compiled(compiled).Monitor
    assert monitor.DOUBLE["state"]["cores"] == 4 and monitor.DOUBLE["rules"]["power"] == (1.5,)
    assert not hasattr(module_from_compiled(compile_spec(MONITOR, "video.asimov")).Monitor, "DOUBLE")


def test_step_rules_reach_the_physics():
    hot = VIDEO.replace("rule throttle = thermal(0.08, 0.1, 3)", "rule throttle = thermal(0.5, 0.1, 6)")
    dtype = device_type_from_spec(compile_spec(hot, "video.asimov"))
    assert (dtype.throttle_down_per_s, dtype.throttle_up_per_s, dtype.throttle_hysteresis_c) == (0.5, 0.1, 6)
    plain = device_type_from_spec(compile_spec(MONITOR + VIDEO[len(MONITOR):].replace("rule power = dynamic(1.5)", ""), "v.asimov"))
    assert plain.power_clock_exponent == 1.5 and plain.job_load == 0.95  # the defaults


def test_defaults_fill_what_a_spec_leaves_out():
    text = VIDEO.replace("state thermal_tau_s = 30.0\n", "").replace("fault overheat = heat(3.0)", "")
    dtype = device_type_from_spec(compile_spec(text, "video.asimov"))
    assert dtype.thermal_tau_s == FIELDS["thermal_tau_s"][1] and "overheat" not in dtype.faults
    assert dtype.max_temperature_c > dtype.ambient_c + dtype.tdp_w * dtype.thermal_resistance


@pytest.mark.parametrize(("line", "column", "message"), [
    ("state corez = 4", 7, "unknown state field 'corez'"),
    ('state driver = "pcie"', 16, "state driver cannot be 'pcie'"),
    ("state cores = 0", 15, "state cores cannot be 0"),
    ("state cores = 2.5", 15, "state cores cannot be 2.5"),
    ('state idle_w = "six"', 16, "state idle_w cannot be 'six'"),
    ('state serial_prefix = "evt"', 23, "state serial_prefix cannot be 'evt'"),
    ('state firmware = {"1.5": 3}', 26, "firmware versions are strings"),
    ("state cores = busy", 15, "needs a value known when compiling"),
    ("fault overheet = heat(3.0)", 7, "unknown fault kind 'overheet'"),
    ("rule throttel = thermal(0.1, 0.1, 3)", 6, "unknown rule 'throttel'"),
    ("rule throttle = dynamic(1.5)", 17, "rule throttle has the form thermal(...)"),
    ("rule power = dynamic(1.5, 2)", 14, "dynamic() takes 1 number(s), got 2"),
    ("fault overheat = leak(3.0)", 18, "fault overheat has the effect heat(...)"),
    ("fault ecc_storm = ecc(1.0)", 19, "ecc() takes 2 number(s), got 1"),
    ("fault memory_leak = leak(-0.1)", 26, "fraction_per_s must be a number >= 0"),
])
def test_bad_lines_are_refused_where_they_are(line, column, message):
    text = MONITOR + "\n" + line + "\n"
    errors = check_spec(text, "video.asimov")
    assert errors, line
    error = errors[0]
    assert message in error.message
    assert (error.line, error.column) == (text.count("\n"), column)


def test_a_field_given_twice_and_fields_that_disagree():
    twice = check_spec(VIDEO + "state cores = 8\n", "video.asimov")
    assert "state cores is given twice" in twice[0].message and twice[0].line == VIDEO.count("\n") + 1
    clocks = check_spec(VIDEO.replace("min_clock_mhz = 400", "min_clock_mhz = 4000"), "video.asimov")
    assert "min_clock_mhz is above max_clock_mhz" in clocks[0].message
    assert clocks[0].line == 3  # at the device statement
    missing = check_spec(MONITOR + 'state driver = "sysfs"\n', "video.asimov")
    assert "lacks state model, serial_prefix, cores" in missing[0].message
    cost = check_spec(VIDEO + "state peak_tflops = 4.0\n", "video.asimov")
    assert "a cost model needs workload" in cost[0].message


def test_a_spec_in_an_extra_folder_is_a_type_and_a_broken_one_is_left_out(tmp_path, caplog):
    from emulator.devices.spec_types import types_from_specs

    (tmp_path / "vt2.asimov").write_text(VIDEO.replace("device video", "device vt2").replace('"EVT"', '"EVW"'))
    (tmp_path / "bad.asimov").write_text(MONITOR.replace("device video", "device bad") + "state cores = 0\n")
    with caplog.at_level("ERROR", logger="emulator.devices.spec_types"):
        types = {t.name: t for t in types_from_specs((str(tmp_path),))}
    assert types["vt2"].serial_prefix == "EVW" and "bad" not in types and {"video", "mtx"} <= set(types)
    assert "bad.asimov" in caplog.text and "state cores cannot be 0" in caplog.text


@pytest.fixture
def card7():
    from emulator.devices.zoo import DEVICE_TYPES
    from emulator.workloads.graph import COST_PROFILES

    yield
    DEVICE_TYPES.pop("card7", None)
    COST_PROFILES.pop("card7", None)


def test_one_spec_gives_a_monitor_and_the_double_it_reads(tmp_path, card7):
    from emulator.devices.doubles import double
    from fleet.asimov.loader import load_monitor_class

    path = tmp_path / "card7.asimov"
    path.write_text((SPECS_DIR / "mtx.asimov").read_text().replace("device mtx", "device card7"))
    host = double(path, seed=3, devices=2)
    (serial, _), t0 = list(host.states.items())[0], host.now
    monitor = load_monitor_class(path)(index=host.binding(serial).index, files=host.binding(serial).files, serial=serial)
    monitor.refresh(t0)
    host.advance(t0 + 30)
    first = monitor.refresh(t0 + 30)
    assert first["device_model"] == "Emu MTX-25" and first["core_count"] == 8 and 0 < first["device_utilization"] <= 1
    host.inject_fault(serial, "pcie_degraded")
    host.advance(t0 + 60)
    after = monitor.refresh(t0 + 60)
    assert after["pcie_link_status"] == "degraded" and after["pcie_link_width"] == 4  # link(2, 2, ...): x8 / 2
    again, replay = double(path, seed=3, devices=2), double(path, seed=3, devices=2)
    again.advance(t0 + 30)
    replay.advance(t0 + 30)
    assert replay.state(serial).to_json() == again.state(serial).to_json()  # the same seed, the same state
    other = double(path, seed=4, devices=2)
    other.advance(t0 + 30)
    assert list(other.states.values())[0].to_json() != again.state(serial).to_json()
