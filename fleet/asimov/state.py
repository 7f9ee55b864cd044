"""The device-double section of a spec: the emulated device's state and its fault rules.

::

    state driver = "sysfs"            # the driver interface the double answers
    state cores = 4
    state max_clock_mhz = 1400
    state thermal_tau_s = 30          # seconds of thermal lag
    rule throttle = thermal(0.08, 0.1, 3)   # clock share down/up a second, hysteresis in °C
    fault overheat = heat(3.0)        # the cooler fails: thermal resistance x 3
    fault ecc_storm = ecc(150, 0.2)   # corrected and uncorrected errors a second

``state NAME = value`` sets one typed field of the double (`FIELDS`: hardware constants
and the initial values the state starts from); ``fault KIND = effect(...)`` says what an
injected fault changes (`FAULT_EFFECTS`: each fault kind has one effect and its numbers);
``rule NAME = form(...)`` sets numbers the update rules read (`STEP_RULES`). The update
rules themselves are the ``step`` and ``on`` lines (`fleet.asimov.rules`): activity -> clock
and power -> temperature with lag -> throttling -> counters, per time step; reboot and a
job's start per command; each fault's effect where the rules test ``fault("kind")``.
The checker refuses unknown fields and faults, values of the wrong type or out of range,
a field given twice and fields that contradict each other, each at its line and column.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from fleet.asimov.checking.checks import suggest
from fleet.asimov.checking.values import NO, Ctx
from fleet.asimov.language.nodes import Call, DictExpr, FaultRule, Neg, Number, StateField, String

if TYPE_CHECKING:
    from fleet.asimov.checking.interface import CheckerInterface

__all__ = [
    "DRIVER_INTERFACES", "FAULT_EFFECTS", "FIELDS", "REQUIRED", "STEP_RULES", "fault_stmt", "finish_state", "state_stmt",
]

#: Driver interfaces a double may answer (emulator.devices.drivers: NVML-, sysfs-, C-library-shaped).
DRIVER_INTERFACES = ("sysfs", "clib", "nvml")
#: Workloads a double may serve (emulator.workloads.graph.WORKLOADS).
WORKLOADS = ("video_pipeline", "recommendation", "transformer", "decode")
REQUIRED = object()

#: field -> (kind, default). Kinds: str, driver, workload, count (int >= 1), bytes
#: (int >= 0), pos (number > 0), num (any number), firmware (a dict of strings).
FIELDS: dict[str, tuple[str, object]] = {
    "driver": ("driver", REQUIRED),
    "model": ("str", REQUIRED),
    "serial_prefix": ("prefix", REQUIRED),
    "cores": ("count", REQUIRED),
    "max_clock_mhz": ("pos", REQUIRED),
    "min_clock_mhz": ("pos", REQUIRED),
    "memory_bytes": ("bytes", REQUIRED),
    "model_memory_bytes": ("bytes", REQUIRED),
    "working_memory_bytes": ("bytes", REQUIRED),
    "idle_w": ("pos", REQUIRED),
    "tdp_w": ("pos", REQUIRED),
    "ambient_c": ("num", 30.0),
    "thermal_resistance": ("pos", 0.5),
    "thermal_tau_s": ("pos", 40.0),
    "throttle_c": ("num", 90.0),
    "pcie_gen": ("count", 4),
    "pcie_width": ("count", 16),
    "pcie_gbps": ("pos", 8.0),
    "counter_bits": ("count", 48),
    "ecc_background_per_s": ("pos", 2e-4),  # corrected ECC errors a second with no fault
    "driver_version": ("str", "1.0.0"),
    "firmware": ("firmware", None),
    "workload": ("workload", None),  # with the three below: the type's cost model
    "peak_tflops": ("pos", None),
    "mem_gbps": ("pos", None),
    "launch_us": ("pos", None),
}

#: fault kind -> (effect, its parameters, their defaults): what the runtime does with them.
FAULT_EFFECTS: dict[str, tuple[str, tuple[str, ...], tuple[float, ...]]] = {
    "overheat": ("heat", ("resistance_factor",), (3.0,)),
    "hang": ("hang", (), ()),
    "memory_leak": ("leak", ("fraction_per_s",), (0.001,)),
    "ecc_storm": ("ecc", ("corrected_per_s", "uncorrected_per_s"), (150.0, 0.2)),
    "pcie_degraded": ("link", ("gens_down", "width_divisor", "errors_per_s"), (2, 4, 25.0)),
    "core_stuck": ("stuck", (), ()),
}

#: step rule -> (form, its parameters, their defaults): the per-time-step update functions of
#: the runtime that take numbers (the temperature lag takes thermal_tau_s from the state).
STEP_RULES: dict[str, tuple[str, tuple[str, ...], tuple[float, ...]]] = {
    "activity": ("jitter", ("load_low", "load_span", "core_low", "core_span"), (0.9, 0.2, 0.85, 0.3)),
    "power": ("dynamic", ("clock_exponent",), (1.5,)),
    "throttle": ("thermal", ("down_per_s", "up_per_s", "hysteresis_c"), (0.08, 0.1, 3)),
    "job": ("held", ("load",), (0.95,)),
}

_PREFIX = re.compile(r"^[A-Z][A-Z0-9]{1,5}$")


def state_stmt(c: CheckerInterface, stmt: StateField, index: int) -> None:
    """Checks one ``state FIELD = value`` and records the value."""
    name = stmt.name.text
    if name not in FIELDS:
        raise c.error(stmt.name, f"unknown state field {name!r}", suggest(name, FIELDS, "a state field"))
    if name in c.state:
        raise c.error(stmt.name, f"state {name} is given twice", "each field once")
    kind = FIELDS[name][0]
    if kind == "firmware":
        c.state[name] = _firmware(c, stmt.value)
        return
    val = c.expr(stmt.value, Ctx())
    if val.const is NO or val.const is None:
        raise c.error(stmt.value, f"state {name} needs a value known when compiling", _EXPECTED[kind])
    c.state[name] = _typed(c, stmt.value, name, kind, val.const)


_EXPECTED = {
    "str": "a string", "prefix": 'two to six capitals, e.g. "EVT"', "driver": " or ".join(DRIVER_INTERFACES),
    "workload": " or ".join(WORKLOADS), "count": "a whole number >= 1", "bytes": "a whole number of bytes",
    "pos": "a number > 0", "num": "a number", "firmware": '{"software version": "firmware version", ...}',
}


def _typed(c: CheckerInterface, where, name: str, kind: str, value):
    ok = {
        "str": isinstance(value, str),
        "prefix": isinstance(value, str) and bool(_PREFIX.match(value)),
        "driver": value in DRIVER_INTERFACES,
        "workload": value in WORKLOADS,
        "count": isinstance(value, int) and not isinstance(value, bool) and value >= 1,
        "bytes": isinstance(value, int) and not isinstance(value, bool) and value >= 0,
        "pos": isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0,
        "num": isinstance(value, (int, float)) and not isinstance(value, bool),
    }[kind]
    if not ok:
        raise c.error(where, f"state {name} cannot be {value!r}", _EXPECTED[kind])
    return value  # as written: 1400 stays an int, 6.0 a float


def _firmware(c: CheckerInterface, node) -> dict[str, str]:
    if not isinstance(node, DictExpr):
        raise c.error(node, "state firmware must be a dict of strings", _EXPECTED["firmware"])
    out = {}
    for pair in node.pairs:
        for part in (pair.key, pair.value):
            if not isinstance(part, String):
                raise c.error(part, "firmware versions are strings", _EXPECTED["firmware"])
        out[pair.key.value] = pair.value.value
    return out


def fault_stmt(c: CheckerInterface, stmt: FaultRule, index: int) -> None:
    """Checks one ``fault KIND = effect(numbers)`` or ``rule NAME = form(numbers)`` and
    records its numbers."""
    kind, word = stmt.kind.text, stmt.word
    table, seen = (FAULT_EFFECTS, c.fault_rules) if word == "fault" else (STEP_RULES, c.step_rules)
    if kind not in table:
        what = "fault kind" if word == "fault" else "rule"
        raise c.error(stmt.kind, f"unknown {what} {kind!r}", suggest(kind, table, f"a {what}"))
    if kind in seen:
        raise c.error(stmt.kind, f"{word} {kind} is given twice", f"one line per {word}")
    effect, params, _ = table[kind]
    call = stmt.effect
    form = f"{effect}({', '.join(params)})"
    if not isinstance(call, Call) or call.function_name != effect:
        raise c.error(call, f"{word} {kind} has the {'effect' if word == 'fault' else 'form'} {effect}(...)", form)
    if len(call.args) != len(params):
        raise c.error(call, f"{effect}() takes {len(params)} number(s), got {len(call.args)}", form)
    numbers = []
    for arg, param in zip(call.args, params, strict=True):
        if isinstance(arg, Neg) or not isinstance(arg, Number) or isinstance(arg.value, bool):
            raise c.error(arg, f"{param} must be a number >= 0", form)
        numbers.append(arg.value)
    seen[kind] = tuple(numbers)


def finish_state(c: CheckerInterface, device) -> None:
    """After every statement: the fields a double needs, and fields that must agree."""
    if not c.state and not c.fault_rules and not c.step_rules:
        return
    missing = [n for n, (_, default) in FIELDS.items() if default is REQUIRED and n not in c.state]
    if missing:
        c.error(device, f"the device double lacks state {', '.join(missing)}", "a state line for each")
        return
    s = c.state
    if s["min_clock_mhz"] > s["max_clock_mhz"]:
        c.error(device, "state min_clock_mhz is above max_clock_mhz", "min_clock_mhz <= max_clock_mhz")
    if s["idle_w"] >= s["tdp_w"]:
        c.error(device, "state idle_w is not below tdp_w", "idle power below the board's TDP")
    if s["model_memory_bytes"] + s["working_memory_bytes"] > s["memory_bytes"]:
        c.error(device, "model and working memory do not fit in memory_bytes", "their sum <= memory_bytes")
    cost = [n for n in ("workload", "peak_tflops", "mem_gbps", "launch_us") if n in s]
    if cost and len(cost) != 4:
        c.error(device, "a cost model needs workload, peak_tflops, mem_gbps and launch_us", "all four or none")
