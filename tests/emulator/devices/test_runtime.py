"""The runtime of a device double's generated state machine: `load_machine` runs the
machine's module with only the functions its update rules may call."""

import pytest

from emulator.devices.runtime import MACHINE_BUILTINS, load_machine
from fleet.asimov.compiler import compile_file
from fleet.asimov.loader import SPECS_DIR


def test_a_shipped_specs_machine_loads_and_has_its_functions():
    compiled = compile_file(SPECS_DIR / "gpu.asimov")
    machine = load_machine(compiled.machine, compiled.source)
    assert callable(machine.step) and machine.source == compiled.source


def test_a_machine_module_finds_no_open_eval_or_imports_beyond_its_own(tmp_path):
    marker = tmp_path / "ran"
    assert not set(MACHINE_BUILTINS) & {"open", "eval", "exec", "getattr", "globals", "compile"}
    for body in (f"open({str(marker)!r}, 'w')", "eval('1')", "getattr(s, 'x')"):
        machine = load_machine(f"def step(s):\n    return {body}\n", "test")
        with pytest.raises(NameError):
            machine.step(None)
    with pytest.raises(ImportError, match="cannot import 'os'"):
        load_machine("import os\ndef step(s):\n    pass\n", "test")
    assert not marker.exists()
