"""A double's update rules (``step`` and ``on`` lines): checked with line and column,
compiled into the state machine the emulator runs, and that machine is what moves the
device (change a rule in the spec and the device does otherwise)."""

from __future__ import annotations

import ast
import dataclasses
import re

import pytest

from emulator.devices.physics import DevicePhysics
from emulator.devices.spec_types import device_type_from_spec
from fleet.asimov.compiler import check_spec, compile_spec
from fleet.asimov.loader import SPECS_DIR
from fleet.asimov.rules import IDENTITY, VARIABLES

VIDEO = (SPECS_DIR / "video.asimov").read_text()
DOUBLE = VIDEO.split("\n# update rules")[0] + "\n"  # the spec without its rules
RULES = VIDEO[len(DOUBLE):]


def test_the_rules_know_the_state_the_runtime_keeps():
    fields = {f.name for f in dataclasses.fields(DevicePhysics)}
    assert fields - {"t", "faults"} == set(VARIABLES) | set(IDENTITY)


def test_every_shipped_double_has_its_rules_compiled():
    for name in ("video", "inference", "gpu", "mtx"):
        compiled = compile_spec((SPECS_DIR / f"{name}.asimov").read_text(), f"{name}.asimov")
        tree = ast.parse(compiled.machine)
        functions = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
        assert functions == {"step", "on_install", "on_reboot", "on_occupy"}, name
        assert "s.temperature_c = " in compiled.machine and "d.thermal_tau_s" in compiled.machine


def _machine_host(text: str, tmp_path, name: str = "vrule"):
    from emulator.devices.doubles import double

    path = tmp_path / f"{name}.asimov"
    path.write_text(text.replace("device video", f"device {name}").replace('"EVT"', '"EVR"'))
    return double(path, seed=4, devices=1)


@pytest.fixture
def vrule():
    from emulator.devices.zoo import DEVICE_TYPES
    from emulator.workloads.graph import COST_PROFILES

    yield
    DEVICE_TYPES.pop("vrule", None)
    COST_PROFILES.pop("vrule", None)


def test_a_rule_changed_in_the_spec_changes_the_device(tmp_path, vrule):
    lag = "step temperature_c = temperature_c + (ambient_c + power_w * r_th - temperature_c) * (1.0 - exp(-dt / thermal_tau_s))"
    assert lag in VIDEO
    pinned = VIDEO.replace(lag, "step temperature_c = 55.5")
    host = _machine_host(pinned, tmp_path)
    serial = next(iter(host.states))
    host.advance(host.states[serial].t + 30)
    assert host.states[serial].temperature_c == 55.5
    host.reboot(serial)
    assert host.states[serial].boots == 1 and host.states[serial].rebooting_until is not None


def test_a_reboot_rule_from_the_spec(tmp_path, vrule):
    host = _machine_host(VIDEO.replace("on reboot boots = boots + 1", "on reboot boots = boots + 10"), tmp_path)
    serial = next(iter(host.states))
    host.reboot(serial)
    assert host.states[serial].boots == 10


def test_a_new_device_starts_as_its_install_rules_say(tmp_path, vrule):
    host = _machine_host(VIDEO.replace("on install ecc_corrected = seeded(4) % 50", "on install ecc_corrected = 1234"), tmp_path)
    state = next(iter(host.states.values()))
    assert state.ecc_corrected == 1234 and state.temperature_c > 30 and state.clock_mhz == 1400


def _where(line: str, text: str = DOUBLE + RULES):
    text = text + line + "\n"
    errors = check_spec(text, "video.asimov")
    assert errors, line
    return errors[0], text.count("\n")


@pytest.mark.parametrize(("line", "column", "message"), [
    ("step power_w = powr_w * 2", 16, "unknown name 'powr_w' in an update rule"),
    ("step cores = 3", 6, "'cores' is a constant of the type and cannot be set"),
    ("step dt = 3", 6, "'dt' is an input and cannot be set"),
    ("step serial = 3", 6, "the device's identity"),
    ("on rebot boots = 0", 4, "unknown command 'rebot'"),
    ("on reboot wobble = 1", 11, "'wobble' is no state variable"),
    ("on reboot boots = dt", 19, "unknown name 'dt'"),
    ('step load = 1.0 if fault("overheet") else 0.0', 26, "fault() takes the name of a fault kind"),
    ("step load = draw(1, 2)", 13, "draw() takes 1 argument(s), got 2"),
    ("step load = min(1.0)", 13, "min() takes 2 to 9 argument(s), got 1"),
    ("step load = sqrt(2)", 13, "'sqrt' is no function of the update rules"),
    ("on install load = draw(1)", 19, "draw() belongs to step rules"),
    ("on install load = dt", 19, "unknown name 'dt'"),
    ("step load = seeded()", 13, "seeded() takes 1 to 4 argument(s), got 0"),
    ("step load = exp", 13, "'exp' is a function"),
    ("step load = stats.temperature_c", 13, "has no place in an update rule"),
    ("step load = [0.0 for cores in range(2)]", 22, "loop variable 'cores' hides a name"),
])
def test_bad_rules_are_refused_where_they_are(line, column, message):
    error, number = _where(line)
    assert message in error.message
    assert (error.line, error.column) == (number, column)


def test_a_local_is_known_only_below_its_rule():
    text = DOUBLE + "step load = later * 2\nstep later = 1.0\n" + RULES
    error = check_spec(text, "video.asimov")[0]
    assert "unknown name 'later'" in error.message
    assert (error.line, error.column) == (DOUBLE.count("\n") + 1, 13)


def test_a_double_without_step_rules_is_refused_at_its_device_line():
    errors = check_spec(DOUBLE, "video.asimov")
    assert [e.message for e in errors] == ["the device double has no step rules"]
    assert errors[0].line == VIDEO.splitlines().index("device video") + 1


def test_a_monitor_alone_needs_no_rules():
    monitor = re.split(r"\n# the emulated device", VIDEO)[0] + "\n"
    assert compile_spec(monitor, "video.asimov").machine == ""
    assert device_type_from_spec(compile_spec(VIDEO, "video.asimov")).machine is not None
