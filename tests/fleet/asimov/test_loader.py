"""Loading monitors from specs: where a device type's spec is found, the class compiled from
it (cached per file version), what a generated module may import, and which specs may run
their diagnose command."""

import pytest

from fleet.asimov import loader

SPEC = 'device board\nt = file("t", int)\nstats.temperature_c = t\n'
DIAGNOSED = (
    'device board\ndiagnose "board-diag --all"\nt = file("t", int)\nstats.temperature_c = t\n'
)


def test_a_spec_folder_is_searched_before_the_shipped_specs(tmp_path):
    (tmp_path / "gpu.asimov").write_text(SPEC)
    assert loader.find_spec("gpu", (tmp_path,)) == tmp_path / "gpu.asimov"
    assert loader.find_spec("gpu") == loader.SPECS_DIR / "gpu.asimov"
    assert loader.find_spec("toaster", (tmp_path,)) is None


def test_an_unknown_device_type_says_where_it_looked(tmp_path):
    with pytest.raises(LookupError, match="no Asimov spec for device type 'toaster'") as exc:
        loader.monitor_class("toaster", (tmp_path,))
    assert str(tmp_path) in str(exc.value)


def test_the_class_is_compiled_once_per_file_version(tmp_path):
    path = tmp_path / "board.asimov"
    path.write_text(SPEC)
    first = loader.monitor_class("board", (tmp_path,))
    assert loader.monitor_class("board", (tmp_path,)) is first
    assert path.resolve() == first.SPEC_FILE
    assert first.COUNTERS == ("temperature_c",)


def test_a_generated_module_imports_only_what_its_header_needs():
    with pytest.raises(ImportError, match="cannot import 'os'"):
        loader.SAFE_BUILTINS["__import__"]("os")
    assert loader.SAFE_BUILTINS["__import__"]("re").__name__ == "re"
    assert "open" not in loader.SAFE_BUILTINS and "eval" not in loader.SAFE_BUILTINS


def test_only_a_spec_from_a_spec_folder_runs_its_diagnose_command(tmp_path):
    from_text = loader.monitor_class_from_text(DIAGNOSED, "board.asimov")
    argv, why = loader.diagnostic_argv(from_text)
    assert argv == () and "refused" in why
    path = tmp_path / "board.asimov"
    path.write_text(DIAGNOSED)
    from_file = loader.load_monitor_class(path)
    assert loader.diagnostic_argv(from_file, (tmp_path,)) == (("board-diag", "--all"), "")
    assert loader.diagnostic_argv(from_file)[0] == ()  # tmp_path is not a spec folder
    assert loader.diagnostic_argv(loader.monitor_class_from_text(SPEC, "board.asimov")) == ((), "")
