"""The events and diagnose statements: a known error catalogue and sources, and a diagnose
command split into arguments that runs without a shell."""

import pytest

from fleet.asimov.compiler import check_spec, compile_spec
from fleet.asimov.events import split_command


def test_specs_declare_events_and_a_diagnostic():
    code = compile_spec('device x\nstats.core_count = 1\nevents nvidia_xid from kmsg, nvml\ndiagnose "dcgmi diag -r 1"\n').code
    assert "EVENTS = {'catalogue': 'nvidia_xid', 'sources': ('kmsg', 'nvml')}" in code
    assert "DIAGNOSTIC = ('dcgmi', 'diag', '-r', '1')" in code  # arguments, run without a shell


@pytest.mark.parametrize(
    ("text", "message", "line", "column"),
    [
        ("device x\nevents intel_xid from kmsg\n", "unknown error catalogue 'intel_xid'", 2, 8),
        ("device x\nevents nvidia_xid from kmsg, syslog\n", "unknown event source 'syslog'", 2, 30),
        ("device x\nevents nvidia_xid from kmsg, kmsg\n", "event source kmsg is named twice", 2, 30),
        ("device x\nevents nvidia_xid from kmsg\nevents amd_ras from kmsg\n", "events are declared twice", 3, 1),
        ('device x\ndiagnose "  "\n', "a diagnose command cannot be empty", 2, 10),
        ('device x\ndiagnose "a"\ndiagnose "b"\n', "diagnose is declared twice", 3, 1),
        (
            'device x\ndiagnose "diag | tee log"\n',
            "bad diagnose command: '|' is shell syntax, and the command runs without a shell",
            2,
            10,
        ),
    ],
)
def test_bad_events_statements_are_reported_with_line_and_column(text, message, line, column):
    errors = check_spec(text + "stats.core_count = 1\n")
    assert errors and message in errors[0].message, [e.message for e in errors]
    assert (errors[0].line, errors[0].column) == (line, column)
    assert "suggest" not in errors[0].expected


def test_a_misspelt_catalogue_gets_a_suggestion():
    (error,) = check_spec("device x\nevents nvidia_xd from kmsg\nstats.core_count = 1\n")
    assert "did you mean 'nvidia_xid'" in error.expected


def test_a_command_is_split_as_a_shell_would_but_shell_syntax_is_refused():
    assert split_command('dcgmi diag -r "1 2"') == ("dcgmi", "diag", "-r", "1 2")
    for bad in ("diag ; reboot", "diag $(whoami)", "diag `id`", "diag > out", "a\0b"):
        with pytest.raises(ValueError):
            split_command(bad)
    with pytest.raises(ValueError):
        split_command('diag "unclosed')
