"""The checks shared by statements and expressions: a counter's kind, unit and values, what a
spec may reach through ``lib`` and attributes, paths, arities and iterables."""

import pytest

from fleet.asimov.compiler import compile_spec
from fleet.asimov.errors import SpecErrors


def _errors(*lines: str) -> list[tuple[int, int, str]]:
    with pytest.raises(SpecErrors) as exc:
        compile_spec("\n".join(("device x", *lines)) + "\n", "x.asimov")
    return [(e.line, e.column, e.message) for e in exc.value.errors]


@pytest.mark.parametrize(
    ("lines", "expected"),
    [
        (
            ('t = file("t", int)', "stats.device_model = t"),
            (
                3,
                22,
                "wrong kind: stats.device_model is an info counter and takes text, but this is a number",
            ),
        ),
        (
            ('t = file("t", int)', "stats.ecc_corrected_total = rate(t)"),
            (
                3,
                29,
                "wrong kind: stats.ecc_corrected_total is a counter (a monotonic total) but rate() and delta() give gauges",
            ),
        ),
        (
            ('t = file("t", int)', 'stats.pcie_link_status = "bad"', "stats.temperature_c = t"),
            (3, 26, "wrong value: stats.pcie_link_status cannot be 'bad'"),
        ),
    ],
)
def test_a_counter_takes_values_of_its_kind_only(lines, expected):
    assert _errors(*lines) == [expected]


@pytest.mark.parametrize(
    ("read", "message"),
    [
        (
            "lib.__class__",
            "attribute '__class__' starts with '_': a spec cannot reach Python's internals",
        ),
        (
            "lib.system(1)",
            "'lib.system' is not a driver function: a spec reaches only its driver's API through lib",
        ),
        (
            "lib.open_handle(1)",
            "'lib.open_handle' is not a driver function: a spec reaches only its driver's API through lib",
        ),
    ],
)
def test_lib_reaches_the_driver_s_functions_and_nothing_else(read, message):
    assert [m for _, _, m in _errors(f"t = {read}", "stats.temperature_c = t")] == [message]


@pytest.mark.parametrize("path", ["/etc/passwd", "../x", "a/../../b", "~/t", "a\\\\b"])
def test_a_path_outside_the_device_s_folder_is_refused(path):
    (message,) = [m for _, _, m in _errors(f't = file("{path}", int)', "stats.temperature_c = t")]
    assert message.startswith("file()'s path must stay inside the device's folder")


def test_arity_keywords_and_iterables_are_checked():
    t = 't = file("t", int)'
    assert _errors(t, "stats.temperature_c = clamp(t, 1)") == [
        (3, 23, "clamp() takes 3 arguments, not 2")
    ]
    assert _errors(t, "stats.temperature_c = round(t, ndigits=1)") == [
        (3, 23, "round() has no argument 'ndigits'")
    ]
    assert _errors(t, "stats.temperature_c = max(t for t in 5)") == [
        (3, 38, "cannot iterate over a number")
    ]


def test_an_unknown_counter_suggests_the_closest_name():
    with pytest.raises(SpecErrors) as exc:
        compile_spec('device x\nt = file("t", int)\nstats.temprature_c = t\n', "x.asimov")
    (error,) = exc.value.errors
    assert error.message == "unknown counter 'stats.temprature_c'"
    assert "did you mean 'temperature_c'?" in error.expected
