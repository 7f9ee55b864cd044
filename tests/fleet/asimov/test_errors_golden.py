"""Golden tests of the Asimov compiler's error messages: file, line, column, the line with a
caret, and what was expected. A change to any message must be deliberate."""

from __future__ import annotations

import pytest

from fleet.asimov.compiler import check_spec

CASES = {
    "discover_nvml_reads_files": (
        'device x\ndiscover nvml()\nt = file("temp", int)\nstats.temperature_c = t\n',
        'discover_nvml_reads_files.asimov:2:10: error: discover nvml() gives each GPU the NVML library, but this spec reads files\n    discover nvml()\n             ^\n  expected discover folders("…", requires=[…]) for a spec that reads files',
    ),
    "discover_folders_calls_lib": (
        'device x\ndiscover folders("/sys/class/x/*")\nonce h = lib.dev_open(index)\nt = lib.dev_temp(h)\nstats.temperature_c = t\n',
        'discover_folders_calls_lib.asimov:2:10: error: discover folders(...) gives each device a folder of files, but this spec calls lib\n    discover folders("/sys/class/x/*")\n             ^\n  expected discover nvml() for a spec that calls the NVML library',
    ),
    "unknown_counter": (
        'device x\nt = file("temp", int)\nstats.temprature_c = t\n',
        "unknown_counter.asimov:3:7: error: unknown counter 'stats.temprature_c'\n    stats.temprature_c = t\n          ^\n  expected a counter of the Asicmon catalogue (did you mean 'temperature_c'?)",
    ),
    "unknown_binding": (
        'device x\ntemp = file("temp", int)\nstats.temperature_c = tmp\n',
        "unknown_binding.asimov:3:23: error: unknown name 'tmp'\n    stats.temperature_c = tmp\n                          ^\n  expected a binding, constant or loop variable defined above (did you mean 'temp'?)",
    ),
    "wrong_unit": (
        'device x\npower = file("power", unit("mW"))\nstats.power_w = power\n',
        'wrong_unit.asimov:3:17: error: wrong unit: the value is in mW but stats.power_w is in W; write convert(..., "W")\n    stats.power_w = power\n                    ^\n  expected a value in W',
    ),
    "wrong_kind": (
        'device x\nv = file("fw", int)\nstats.firmware_version = v\n',
        "wrong_kind.asimov:3:26: error: wrong kind: stats.firmware_version is an info counter and takes text, but this is a number\n    stats.firmware_version = v\n                             ^\n  expected text, e.g. str(...)",
    ),
    "rate_of_gauge": (
        'device x\nt = file("t", int)\nstats.temperature_c = t\nstats.ecc_corrected_per_s = rate(stats.temperature_c)\n',
        "rate_of_gauge.asimov:4:34: error: rate() needs a monotonic counter, but this is a gauge\n    stats.ecc_corrected_per_s = rate(stats.temperature_c)\n                                     ^\n  expected a counter: a binding read from the driver or a stats counter of kind counter",
    ),
    "assigned_twice": (
        'device x\nt = file("t", int)\nstats.temperature_c = t\nstats.temperature_c = t + 1\n',
        "assigned_twice.asimov:4:7: error: stats.temperature_c is assigned twice (first on line 3)\n    stats.temperature_c = t + 1\n          ^\n  expected one assignment per counter",
    ),
    "unused_read": (
        'device x\nt = file("t", int)\nfan = file("fan1_input", int)\nstats.temperature_c = t\n',
        "unused_read.asimov:3:1: error: 'fan' is read from the driver but never used\n    fan = file(\"fan1_input\", int)\n    ^\n  expected a use in a stats counter or another binding (or remove the read)",
    ),
    "syntax": (
        'device x\nt = file("t", int\nstats.temperature_c = t\n',
        "syntax.asimov:2:9: error: '(' is never closed\n    t = file(\"t\", int\n            ^\n  expected ')'",
    ),
    "bad_state": (
        'device x\nw = file("w", int)\nstats.pcie_link_status = "broken" if w < 4 else "ok"\n',
        "bad_state.asimov:3:26: error: wrong value: stats.pcie_link_status cannot be 'broken'\n    stats.pcie_link_status = \"broken\" if w < 4 else \"ok\"\n                             ^\n  expected one of 'ok', 'degraded'",
    ),
    "runtime_counter": (
        'device x\nstats.driver_status = "ok"\n',
        'runtime_counter.asimov:2:7: error: stats.driver_status is set by the monitor runtime, not by specs\n    stats.driver_status = "ok"\n          ^\n  expected another counter',
    ),
    "bad_parser": (
        'device x\nt = file("t", integer)\nstats.temperature_c = t\n',
        'bad_parser.asimov:2:15: error: unknown parser\n    t = file("t", integer)\n                  ^\n  expected a parser: int, float, hex, str, unit("mW"), regex(r"...", int), field("key", int) or words("key", int)',
    ),
    "read_in_stats": (
        'device x\nstats.temperature_c = file("t", int)\n',
        'read_in_stats.asimov:2:23: error: file() reads the driver and belongs in bindings\n    stats.temperature_c = file("t", int)\n                          ^\n  expected name = file(...) above, then use the name',
    ),
    "outs_mismatch": (
        "device x\nonce h = lib.dev_open(index, out)\na = lib.dev_mem(h, out, out)\nstats.memory_used_bytes = a\n",
        "outs_mismatch.asimov:3:5: error: dev_mem() fills 2 out-parameters but 1 name is assigned\n    a = lib.dev_mem(h, out, out)\n        ^\n  expected 2 names on the left",
    ),
    "bad_char": (
        'device x\nt = file("t", int) $\n',
        "bad_char.asimov:2:20: error: unexpected character '$'\n    t = file(\"t\", int) $\n                       ^\n  expected a name, a number, a string, an operator or a bracket",
    ),
    "unknown_state_field": (
        "device x\nstate corez = 4\n",
        "unknown_state_field.asimov:2:7: error: unknown state field 'corez'\n    state corez = 4\n          ^\n  expected a state field (did you mean 'cores'?)",
    ),
    "fault_wrong_effect": (
        "device x\nfault overheat = leak(3.0)\n",
        "fault_wrong_effect.asimov:2:18: error: fault overheat has the effect heat(...)\n    fault overheat = leak(3.0)\n                     ^\n  expected heat(resistance_factor)",
    ),
    "rule_wrong_count": (
        "device x\nrule power = dynamic(1.5, 2)\n",
        "rule_wrong_count.asimov:2:14: error: dynamic() takes 1 number(s), got 2\n    rule power = dynamic(1.5, 2)\n                 ^\n  expected dynamic(clock_exponent)",
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_error_message(name):
    spec, expected = CASES[name]
    errors = check_spec(spec, f"{name}.asimov")
    assert "\n".join(str(e) for e in errors) == expected
