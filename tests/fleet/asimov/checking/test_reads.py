"""Driver reads in a spec: bindings with their units, library calls with out-parameters, and
reads nothing uses."""

import pytest

from fleet.asimov.compiler import compile_spec
from fleet.asimov.errors import SpecErrors
from fleet.asimov.loader import monitor_class_from_text

T0 = 1_700_000_000.0


class _Lib:
    """A C-style driver: status 0, values written into out-parameters."""

    def __init__(self):
        self.calls = []

    def dev_init(self):
        self.calls.append("init")
        return 0

    def dev_clocks(self, index, current, maximum):
        self.calls.append(("clocks", index))
        current.value, maximum.value = 1200, 1800
        return 0


def _errors(*lines: str) -> list[tuple[int, int, str]]:
    with pytest.raises(SpecErrors) as exc:
        compile_spec("\n".join(("device x", *lines)) + "\n", "x.asimov")
    return [(e.line, e.column, e.message) for e in exc.value.errors]


def test_out_parameters_fill_the_names_on_the_left_and_call_statements_run():
    spec = "device x\nlib.dev_init()\nclock, top = lib.dev_clocks(index, out, out)\n"
    spec += "stats.clock_mhz = clock\nstats.clock_max_mhz = top\n"
    lib = _Lib()
    snap = monitor_class_from_text(spec, "x.asimov")(index=2, lib=lib).refresh(T0)
    assert (snap["clock_mhz"], snap["clock_max_mhz"]) == (1200, 1800)
    assert lib.calls == ["init", ("clocks", 2)]


def test_names_on_the_left_must_match_the_out_parameters():
    assert _errors("a, b = lib.dev_pair(out)", "stats.temperature_c = a") == [
        (2, 8, "dev_pair() fills 1 out-parameter but 2 names are assigned")
    ]
    assert _errors('a, b = file("t", int)', "stats.temperature_c = a") == [
        (2, 8, "only a call with out-parameters can fill several names")
    ]


def test_an_annotation_must_agree_with_the_unit_read():
    errors = _errors('p: mW = file("p", unit("W"))', 'stats.power_w = convert(p, "W")')
    assert errors[0] == (2, 2, "the annotation says mW but the value is in W")


def test_a_read_nothing_uses_is_an_error():
    errors = _errors('t = file("t", int)', 'u = file("u", int)', "stats.temperature_c = t")
    assert errors == [(3, 1, "'u' is read from the driver but never used")]


def test_a_statement_on_its_own_must_be_a_library_call():
    errors = _errors('t = file("t", int)', "stats.temperature_c = t", "1 + 2")
    assert errors == [(4, 1, "a statement on its own must be a library call")]
