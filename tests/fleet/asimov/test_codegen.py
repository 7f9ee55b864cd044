"""Code generation: the monitor module a checked spec becomes, its once reads in ``_open``,
its counters in ``_probe``, and a counter that cannot be computed from odd values read as None."""

import ast

import pytest

from fleet.asimov.checking.values import Symbol
from fleet.asimov.codegen import guarded, python_name
from fleet.asimov.compiler import compile_spec
from fleet.asimov.loader import monitor_class_from_text
from fleet.hosts.local import FileRoot

T0 = 1_700_000_000.0
SPEC = (
    "device board\n"
    'once m = file("model", str)\n'
    't = file("t", int)\n'
    'u = file("u", int)\n'
    "stats.device_model = m\n"
    "stats.temperature_c = t / u\n"
)


def _methods(code: str) -> dict[str, str]:
    (klass,) = [n for n in ast.parse(code).body if isinstance(n, ast.ClassDef)]
    return {f.name: ast.unparse(f) for f in klass.body if isinstance(f, ast.FunctionDef)}


def test_once_reads_go_to_open_and_the_rest_to_every_probe():
    code = compile_spec(SPEC, "board.asimov").code
    assert "class Monitor(_rt.DeviceMonitor):" in code
    assert "COUNTERS = ('device_model', 'temperature_c')" in code
    methods = _methods(code)
    assert "read('model')" in methods["_open"] and "read('model')" not in methods["_probe"]
    assert "read('t')" in methods["_probe"] and "read('t')" not in methods["_open"]


def test_a_counter_that_fails_on_the_values_read_is_none_and_the_others_are_kept(tmp_path):
    for name, text in (("model", "Emu-1\n"), ("t", "60\n"), ("u", "0\n")):
        (tmp_path / name).write_text(text)
    monitor = monitor_class_from_text(SPEC, "board.asimov")(files=FileRoot(tmp_path))
    snap = monitor.refresh(T0)
    assert snap["driver_status"] == "ok"
    assert snap["device_model"] == "Emu-1" and snap["temperature_c"] is None
    (tmp_path / "u").write_text("2\n")
    assert monitor.refresh(T0 + 1)["temperature_c"] == 30


def test_only_what_can_fail_is_guarded():
    assert guarded("x", "b_t") == ["x = b_t"]
    assert guarded("x", "'ok'") == ["x = 'ok'"]
    lines = guarded("x", "(b_t / b_u)")
    assert lines[0] == "try:" and lines[-1] == "    x = None"
    assert guarded("x", "b_t", always=True)[0] == "try:"


@pytest.mark.parametrize(
    ("symbol", "name"),
    [
        (Symbol("LIMIT", "const", value=90), "90"),
        (Symbol("t", "binding"), "b_t"),
        (Symbol("h", "once"), "o_h"),
        (Symbol("c", "loop"), "v_c"),
        (Symbol("lib", "special"), "lib"),
        (Symbol("_", "binding"), "_"),
    ],
)
def test_each_kind_of_name_has_its_own_prefix_in_the_generated_code(symbol, name):
    assert python_name(symbol) == name
