"""The device double's update rules: ``step`` lines (every time step, in order) and ``on``
lines (when a command reaches the device), checked here and compiled into the Python of the
double's state machine.

::

    on install temperature_c = ambient_c + idle_w * thermal_resistance
    step load = min(1.0, wanted * (activity_load_low + activity_load_span * draw(7)))
    step temperature_c = temperature_c + (ambient_c + power_w * thermal_resistance - temperature_c) * (1 - exp(-dt / thermal_tau_s))
    on reboot boots = boots + 1

A rule sets one name to an expression. The commands: ``install`` (a new device's state,
before its first step), ``reboot``, ``occupy`` (a distributed job holds it until ``until``). The names an expression may read:

* the device's state variables (`VARIABLES`: ``temperature_c``, ``core_activity``, ...):
  the value now, that is after the rules above it in this step;
* the type's constants: every ``state`` field (`fleet.asimov.state.FIELDS`), and the numbers
  of the ``rule`` and ``fault`` lines as ``<rule>_<parameter>`` (``throttle_down_per_s``,
  ``overheat_resistance_factor``);
* the inputs of the step or command (`INPUTS`: ``t``, ``dt``, ``rebooting``, ...);
* names a ``step`` line above set that are no state variable (the step's own locals), and
  the loop variable of a list comprehension.

Functions (`FUNCTIONS`): ``min``, ``max``, ``abs``, ``round``, ``sum``, ``len``, ``range``,
``exp``; ``draw(k)``, a uniform number in [0, 1) that is the same for the same seed, device,
100 ms tick and ``k``; ``poisson(mean, k)``, a Poisson count drawn the same way;
``fault("kind")``, whether that fault is on the device; ``demand(t)``, the daily demand of
the device's workload (these three in ``step`` rules only); ``seeded(a, ...)``, a whole
number from the device's key and ``a, ...``, the same for the device whatever the time
(what ``on install`` rules start a device with). Inputs, constants and the device's
identity cannot be set. Each error
is reported at its line and column. `emit_machine` writes the module the emulator runs
(`emulator.devices.physics`): ``step(s, d, t, dt, h, rebooting, workload, host_key,
items_per_s)`` and ``on_<command>(s, d, t, ...)``.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from fleet.asimov.checking.checks import suggest
from fleet.asimov.language import nodes
from fleet.asimov.state import FAULT_EFFECTS, FIELDS, STEP_RULES

if TYPE_CHECKING:
    from fleet.asimov.checking.interface import CheckerInterface

__all__ = ["COMMANDS", "FUNCTIONS", "INPUTS", "VARIABLES", "emit_machine", "on_stmt", "step_stmt"]

#: The state variables of a device (emulator.devices.physics.DevicePhysics, less its identity).
VARIABLES = (
    "temperature_c", "power_w", "clock_mhz", "throttle_thermal", "throttle_power", "core_activity",
    "core_active_cycles", "core_total_cycles", "core_busy_us", "memory_used_bytes", "leaked_bytes",
    "ecc_corrected", "ecc_uncorrected", "pcie_errors", "dma_to_device_bytes", "dma_from_device_bytes",
    "energy_mj", "work_items", "load", "rebooting_until", "job_until", "boots", "stuck_core",
)
#: Read-only names of the device: its identity and the time its state is at.
IDENTITY = ("serial", "type", "key")
#: What a step or command is given. Every command has ``t``, the device's time.
INPUTS: dict[str, tuple[str, ...]] = {
    "step": ("t", "dt", "rebooting", "workload", "host_key", "items_per_s"),
    "install": ("t",),
    "reboot": ("t", "duration_s"),
    "occupy": ("t", "until"),
}
COMMANDS = tuple(k for k in INPUTS if k != "step")
#: function -> (least, most arguments).
FUNCTIONS: dict[str, tuple[int, int]] = {
    "min": (2, 9), "max": (2, 9), "abs": (1, 1), "round": (1, 2), "sum": (1, 1), "len": (1, 1),
    "range": (1, 3), "exp": (1, 1), "draw": (1, 1), "poisson": (2, 2), "fault": (1, 1), "demand": (1, 1),
    "seeded": (1, 4),
}
STEP_ONLY = ("draw", "poisson", "demand")  # they draw on the step's tick and workload
_CODE = {
    "exp": "_exp", "draw": "_unit(_mix_on(_h, {0}))", "poisson": "_poisson({0}, _mix_on(_h, {1}))",
    "demand": "_demand({0}, workload, host_key)", "seeded": "_mix(s.key, {all})",
}


def constants() -> tuple[str, ...]:
    """The type's constants a rule may read."""
    derived = [f"{rule}_{p}" for rule, (_, params, _) in STEP_RULES.items() for p in params]
    derived += [f"{fault}_{p}" for fault, (_, params, _) in FAULT_EFFECTS.items() for p in params]
    return (*FIELDS, *derived)


CONSTANTS = frozenset(constants())


def step_stmt(c: CheckerInterface, stmt: nodes.Rule, index: int) -> None:
    """Checks ``step NAME = expr`` (or ``on COMMAND NAME = expr``) and keeps its code."""
    when = stmt.when.text
    if when not in INPUTS:
        raise c.error(stmt.when, f"unknown command {when!r}", suggest(when, COMMANDS, "a command"))
    rules = c.rules.setdefault(when, [])
    local = c.rule_locals.setdefault(when, set())
    code = _expr(c, stmt.value, when, local, ())
    name = stmt.name.text
    if name in INPUTS[when] or name in CONSTANTS or name in IDENTITY:
        what = "an input" if name in INPUTS[when] else "a constant of the type" if name in CONSTANTS else "the device's identity"
        raise c.error(stmt.name, f"'{name}' is {what} and cannot be set", "a state variable or a new local name")
    if name in VARIABLES:
        rules.append(f"s.{name} = r_{name} = {code}")
    else:
        if when != "step":
            raise c.error(stmt.name, f"'{name}' is no state variable", suggest(name, VARIABLES, "a state variable"))
        local.add(name)
        rules.append(f"v_{name} = {code}")


on_stmt = step_stmt


def _expr(c: CheckerInterface, node: nodes.Expr, when: str, local: set[str], loops: tuple[str, ...]) -> str:
    """The Python of a rule's expression; raises at the first part that is not allowed."""
    def sub(n: nodes.Expr) -> str:
        return _expr(c, n, when, local, loops)

    form = _FORMS.get(type(node))
    if form is not None:
        return form(node, sub)
    if isinstance(node, nodes.Name):
        return _name(c, node, when, local, loops)
    if isinstance(node, nodes.ListComp):
        var = node.loop.var.text
        if var in VARIABLES or var in CONSTANTS or var in INPUTS[when] or var in local or var in loops:
            raise c.error(node.loop.var, f"loop variable '{var}' hides a name of the double", "a fresh name")
        iterable = sub(node.loop.iterable)
        element = _expr(c, node.element, when, local, (*loops, var))
        return f"[{element} for l_{var} in {iterable}]"
    if isinstance(node, nodes.Call):
        return _call(c, node, sub, when)
    raise c.error(node, "this expression has no place in an update rule", "numbers, names, operators and calls")


# expression form -> its Python, given the Python of its parts (``sub``)
_FORMS = {
    nodes.Number: lambda n, sub: repr(n.value),
    nodes.Boolean: lambda n, sub: repr(n.value),
    nodes.String: lambda n, sub: repr(n.value),
    nodes.NoneLiteral: lambda n, sub: "None",
    nodes.BinOp: lambda n, sub: f"({sub(n.left)} {n.op} {sub(n.right)})",
    nodes.Compare: lambda n, sub: f"({sub(n.left)} {n.op} {sub(n.right)})",
    nodes.BoolOp: lambda n, sub: f"({sub(n.left)} {n.op} {sub(n.right)})",
    nodes.Neg: lambda n, sub: f"(-{sub(n.operand)})",
    nodes.Not: lambda n, sub: f"(not {sub(n.operand)})",
    nodes.IfElse: lambda n, sub: f"({sub(n.body)} if {sub(n.test)} else {sub(n.orelse)})",
    nodes.Subscript: lambda n, sub: f"{sub(n.obj)}[{sub(n.index)}]",
    nodes.ListExpr: lambda n, sub: "[" + ", ".join(sub(i) for i in n.items) + "]",
}


def _name(c: CheckerInterface, node: nodes.Name, when: str, local: set[str], loops: tuple[str, ...]) -> str:
    name = node.id
    if name in loops:
        return f"l_{name}"
    if name in INPUTS[when]:
        return name
    if name in local:
        return f"v_{name}"
    if name in VARIABLES:
        return f"r_{name}"  # a local copy, read from the state once (emit_machine)
    if name in IDENTITY:
        return f"s.{name}"
    if name in CONSTANTS:
        return f"k_{name}"  # likewise the type's constant
    if name in FUNCTIONS:
        raise c.error(node, f"'{name}' is a function", f"a call: {name}(...)")
    known = (*loops, *INPUTS[when], *local, *VARIABLES, *CONSTANTS)
    raise c.error(node, f"unknown name '{name}' in an update rule", suggest(name, known, "a state variable, constant or input"))


def _call(c: CheckerInterface, node: nodes.Call, sub, when: str) -> str:
    fn = node.function_name
    if fn not in FUNCTIONS:
        shown = fn or "this call"
        raise c.error(node.func, f"'{shown}' is no function of the update rules", suggest(fn or "", FUNCTIONS, "a function"))
    if fn in STEP_ONLY and when != "step":
        raise c.error(node.func, f"{fn}() belongs to step rules", "seeded(...) for a number fixed per device")
    args = node.args
    for arg in args:
        if not isinstance(arg, nodes.Expr):
            raise c.error(arg, f"{fn}() takes plain arguments", f"{fn}(value, ...)")
    least, most = FUNCTIONS[fn]
    if not least <= len(args) <= most:
        wanted = str(least) if least == most else f"{least} to {most}"
        raise c.error(node, f"{fn}() takes {wanted} argument(s), got {len(args)}", f"{fn}(...)")
    if fn == "fault":
        kind = args[0]
        if not isinstance(kind, nodes.String) or kind.value not in FAULT_EFFECTS:
            raise c.error(kind, "fault() takes the name of a fault kind", " or ".join(f'"{k}"' for k in FAULT_EFFECTS))
        return f"({kind.value!r} in _faults)"
    codes = [sub(a) for a in args]
    if fn in ("min", "max") and len(codes) == 1:
        raise c.error(node, f"{fn}() takes 2 or more arguments", f"{fn}(a, b)")
    template = _CODE.get(fn)
    if template is None:
        return f"{fn}({', '.join(codes)})"
    if "{" not in template:
        return f"{template}({', '.join(codes)})"
    return template.format(*codes, all=", ".join(codes))


def finish_rules(c: CheckerInterface, device: nodes.Node) -> None:
    """After every statement: a double needs its step rules."""
    if c.state and not c.rules.get("step"):
        c.error(device, "the device double has no step rules", "step lines: how its state moves each time step")


_LOCAL = re.compile(r"\b([rk])_(\w+)")


def _locals(lines: list[str]) -> list[str]:
    """The lines that read, once at the top of a rule function, each constant (``k_``) its
    rules use and each state variable (``r_``) they read before they set it: locals are
    faster than attributes."""
    used: dict[tuple[str, str], None] = {}
    assigned: set[str] = set()
    for line in lines:
        target, _, value = line.partition(" = r_") if line.startswith("s.") else ("", "", line)
        if target:
            value = value.partition(" = ")[2]
        for kind, name in (m.groups() for m in _LOCAL.finditer(value)):
            if name not in (CONSTANTS if kind == "k" else VARIABLES):
                continue  # text that only looks like one (inside a string): never an attribute read
            if kind == "k" or name not in assigned:
                used[(kind, name)] = None
        if target:
            assigned.add(target[2:])
    return [f"{kind}_{name} = {'s' if kind == 'r' else 'd'}.{name}" for kind, name in used]


def emit_machine(device: str, filename: str, rules: dict[str, list[str]]) -> str:
    """The Python module of a double's state machine (empty text for a spec without rules)."""
    if not rules:
        return ""
    out = [
        f"# Generated by asimov from {filename}: the state machine of the {device} double; do not edit.",
        "from math import exp as _exp",
        "",
        "from emulator.devices.runtime import demand as _demand, mix as _mix, mix_on as _mix_on, poisson as _poisson, unit as _unit",
        "",
    ]
    signature = {"step": "s, d, t, dt, _h, rebooting, workload, host_key, items_per_s"}
    for when in INPUTS:
        lines = rules.get(when, [])
        if when != "step" and not lines:
            continue
        args = signature.get(when) or ", ".join(("s", "d", *INPUTS[when]))
        out += ["", f"def {'step' if when == 'step' else 'on_' + when}({args}):", "    _faults = s.faults"]
        out += [f"    {line}" for line in _locals(lines) + lines] or ["    pass"]
        out.append("")
    return "\n".join(out)
