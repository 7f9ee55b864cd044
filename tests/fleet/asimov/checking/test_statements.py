"""The statements of a spec: the device line, constants, error codes, counters and health
limits, each checked where it is written."""

import pytest

from fleet.asimov.compiler import compile_spec
from fleet.asimov.errors import SpecErrors

READ = ('t = file("t", int)', "stats.temperature_c = t")


def _errors(text: str) -> list[tuple[int, int, str]]:
    with pytest.raises(SpecErrors) as exc:
        compile_spec(text, "x.asimov")
    return [(e.line, e.column, e.message) for e in exc.value.errors]


def _spec(*lines: str) -> str:
    return "\n".join(lines) + "\n"


def test_constants_error_codes_and_health_limits_reach_the_compiled_spec():
    compiled = compile_spec(
        _spec(
            "device x",
            "const HUNG = 1 + 2",
            'error HUNG means "hung"',
            "health cooling_c_per_w = 1.5",
            *READ,
        )
    )
    assert compiled.device == "x"
    assert compiled.error_status == {3: "hung"}
    assert compiled.counters == ("temperature_c",)


def test_the_device_statement_comes_first():
    assert _errors(_spec(READ[0], "device x", READ[1])) == [
        (2, 1, "'device' must be the first statement")
    ]


def test_a_counter_assigned_twice_names_the_first_assignment():
    assert _errors(_spec("device x", *READ, READ[1])) == [
        (4, 7, "stats.temperature_c is assigned twice (first on line 3)")
    ]


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("const K = t", (3, 11, "a constant needs a value known when compiling")),
        ('error 3 means "on fire"', (3, 15, "unknown driver status 'on fire'")),
        (
            'health cooling_c_per_w = "a"',
            (3, 26, "health cooling_c_per_w needs a number known when compiling"),
        ),
        (
            "stats.driver_status = 1",
            (3, 7, "stats.driver_status is set by the monitor runtime, not by specs"),
        ),
    ],
)
def test_a_wrong_statement_is_reported_and_the_rest_still_checked(line, expected):
    assert _errors(_spec("device x", READ[0], line, READ[1])) == [expected]


def test_an_unknown_health_limit_suggests_the_closest_one():
    with pytest.raises(SpecErrors) as exc:
        compile_spec(_spec("device x", "health cooling_c_per_ww = 1", *READ), "x.asimov")
    (error,) = exc.value.errors
    assert error.message == "unknown health limit 'cooling_c_per_ww'"
    assert "did you mean 'cooling_c_per_w'?" in error.expected
