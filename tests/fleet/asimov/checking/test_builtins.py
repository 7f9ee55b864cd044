"""Asimov's built-in functions: what each accepts when a spec is checked, and what the
monitor compiled from it computes."""

import pytest

from fleet.asimov.compiler import compile_spec
from fleet.asimov.errors import SpecErrors
from fleet.asimov.loader import monitor_class_from_text
from fleet.hosts.local import FileRoot

T0 = 1_700_000_000.0


def _errors(*lines: str) -> list[tuple[int, int, str]]:
    with pytest.raises(SpecErrors) as exc:
        compile_spec("\n".join(("device x", *lines)) + "\n", "x.asimov")
    return [(e.line, e.column, e.message) for e in exc.value.errors]


def _monitor(folder, *lines: str):
    spec = "\n".join(("device x", *lines)) + "\n"
    return monitor_class_from_text(spec, "x.asimov")(files=FileRoot(folder))


def test_file_parsers_read_units_fields_and_patterns(tmp_path):
    (tmp_path / "power").write_text("87000 mW\n")
    (tmp_path / "status").write_text("clock: 1500\nmodel Emu-1\n")
    (tmp_path / "aer").write_text("RxErr 0\nTOTAL_ERR_COR 7\n")
    monitor = _monitor(
        tmp_path,
        'p = file("power", unit("mW"))',
        'f = file("status", field("clock", int))',
        'a = file("aer", regex(r"TOTAL_ERR_COR (\\d+)", int))',
        'stats.power_w = convert(p, "W")',
        "stats.clock_mhz = f",
        "stats.pcie_errors_total = a",
    )
    snap = monitor.refresh(T0)
    assert snap["power_w"] == pytest.approx(87.0)
    assert snap["clock_mhz"] == 1500
    assert snap["pcie_errors_total"] == 7


def test_flags_names_the_bits_set_and_says_none_when_there_are_none(tmp_path):
    (tmp_path / "reasons").write_text("3\n")
    lines = (
        'f = file("reasons", int)',
        'stats.throttle_reasons = flags(f, {1: "thermal", 2: "power"}, "idle")',
    )
    monitor = _monitor(tmp_path, *lines)
    assert monitor.refresh(T0)["throttle_reasons"] == "thermal,power"
    (tmp_path / "reasons").write_text("0\n")
    assert monitor.refresh(T0 + 1)["throttle_reasons"] == "idle"


def test_a_rate_of_a_counter_is_per_second_of_the_refreshes(tmp_path):
    (tmp_path / "ecc").write_text("100\n")
    monitor = _monitor(tmp_path, 'e = file("ecc", int)', "stats.ecc_corrected_per_s = rate(e)")
    monitor.refresh(T0)
    (tmp_path / "ecc").write_text("150\n")
    assert monitor.refresh(T0 + 10)["ecc_corrected_per_s"] == pytest.approx(5.0)


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        (('t = file("t", unit("furlong"))', "stats.temperature_c = t"), "unknown unit 'furlong'"),
        (
            ('t = file("t", regex(r"(a)(b)", int))', "stats.temperature_c = t"),
            "the regular expression has 2 groups",
        ),
        (
            ('t = file("t", int)', 'stats.temperature_c = convert(t, "C")'),
            "convert() needs a value with a known unit",
        ),
        (('p: mW = file("p", int)', 'stats.power_w = convert(p, "B")'), "cannot convert mW to B"),
        (
            ('t = file("t", int)', "stats.temperature_c = sum(t)"),
            "sum() needs a list or a generator, not a number",
        ),
        (
            ('e = file("e", int)', "stats.ecc_corrected_per_s = rate(e, wrap=-1)"),
            "wrap must be a positive integer constant",
        ),
        (
            ('f = file("f", int)', 'stats.throttle_reasons = flags(f, {"a": "x"})'),
            "flags() needs a constant {bit: name} dictionary",
        ),
        (
            ('t = optional(file("t", int)) + 1', "stats.temperature_c = t"),
            "optional() must be the whole right-hand side of a binding",
        ),
    ],
)
def test_a_built_in_called_wrongly_is_an_error_that_says_what_is_wrong(lines, message):
    assert [m for _, _, m in _errors(*lines)] == [message]


def test_a_file_read_outside_a_binding_is_refused_where_it_is_written():
    errors = _errors(
        't = file("t", int)', "stats.temperature_c = t", 'stats.device_model = file("m", str)'
    )
    assert errors == [(4, 22, "file() reads the driver and belongs in bindings")]


def test_max_of_values_in_different_units_is_a_unit_mismatch():
    errors = _errors(
        'p: mW = file("p", int)',
        't: mC = file("t", int)',
        'stats.power_w = convert(max(p, t), "W")',
    )
    assert errors == [(4, 25, "unit mismatch: max() arguments are in mW and mC")]
