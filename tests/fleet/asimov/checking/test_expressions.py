"""Expressions in a spec: what the checker accepts of names, counters, calls and operators,
and what the compiled monitor computes from them."""

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


def test_text_joins_comprehensions_aggregate_and_branches_choose(tmp_path):
    for core, busy in enumerate((20, 60, 40)):
        (tmp_path / f"core{core}").write_text(f"{busy}\n")
    (tmp_path / "width").write_text("2\n")
    spec = "\n".join(
        (
            "device x",
            "const CORES = 1 + 2",
            'busy = [file("core{c}", int) for c in range(CORES)]',
            'width = file("width", int)',
            'stats.firmware_version = "v" + str(CORES)',
            "stats.core_count = len(busy)",
            "stats.device_utilization = max(b for b in busy) / 100",
            'stats.pcie_link_status = "degraded" if width < 4 else "ok"',
        )
    )
    snap = monitor_class_from_text(spec + "\n", "x.asimov")(files=FileRoot(tmp_path)).refresh(T0)
    assert snap["firmware_version"] == "v3"
    assert snap["core_count"] == 3
    assert snap["device_utilization"] == pytest.approx(0.6)
    assert snap["pcie_link_status"] == "degraded"


def test_constant_arithmetic_is_done_when_compiling():
    code = compile_spec(
        'device x\nconst K = 2 ** 10\nt = file("t", int)\nstats.memory_used_bytes = t * K\n'
    ).code
    assert "* 1024" in code


@pytest.mark.parametrize(
    ("lines", "expected"),
    [
        (("u = stats.temperature_c",), (2, 11, "bindings cannot use stats counters")),
        (
            ("stats.power_w = stats.clock_mhz",),
            (2, 23, "stats.clock_mhz is used before it is assigned"),
        ),
        (("stats.temperature_c = frobnicate(1)",), (2, 23, "unknown function 'frobnicate'")),
        (('stats.temperature_c = 1 + "a"',), (2, 27, "'+' needs numbers, not text")),
        (("stats.temperature_c = 1 / 0",), (2, 23, "'/' cannot be computed on these constants")),
        (("stats.temperature_c = 3[0]",), (2, 23, "cannot index a number")),
        (
            ("stats.temperature_c = lib.dev_temp()",),
            (2, 23, "library calls read the driver and belong in bindings"),
        ),
    ],
)
def test_a_wrong_expression_is_reported_at_its_place(lines, expected):
    assert _errors(*lines) == [expected]


def test_adding_values_in_different_units_is_a_unit_mismatch():
    errors = _errors(
        'p: mW = file("p", int)',
        't: mC = file("t", int)',
        'stats.temperature_c = convert(t + p, "C")',
    )
    assert errors == [(4, 31, "unit mismatch: the operands of '+' are in mC and mW")]
