"""``cascade FAULT = kmsg(...)``: a driver-error fault of the device double and how it plays
out, the lines its driver writes to the kernel log and what they do to the device.

::

    cascade xid_79 = kmsg("nvidia", "reboot_host", step(0, "79", "GPU has fallen off the bus.", "hang"))
    cascade xid_95 = kmsg("nvidia", "reset_device", step(0, "95", "Uncontained: FBHUB."), repeat=200)
    cascade xid_48 = kmsg("nvidia", "reset_device", step(0, "48", "..."), step(1, "63", "..."),
                          spare_rows=2, exhausted=step(1, "64", "..."))

``kmsg(VENDOR, NEEDS, step, ...)``: the line format (``"nvidia"``: ``NVRM: Xid`` lines,
``"amd"``: amdgpu's), the rung of the repair ladder that cures the fault (`RUNGS`), and
its steps in order: ``step(AFTER_S, CODE, TEXT)`` writes a line AFTER_S seconds after the
injection, ``step(..., "hang")`` also stops the device answering. Keywords: ``repeat=N``
writes the first line N times (a flood); ``spare_rows=N`` counts the fault's uses against
N spare memory rows and, past them, plays the first step then ``exhausted`` and needs
``inspect_hardware``. The emulator's runtime (`emulator.devices.driver_errors`) plays
them; every cascade of the shipped specs can be injected into any emulated device.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fleet.asimov.checking.checks import suggest
from fleet.asimov.language.nodes import Call, Keyword, Neg, Number, String

if TYPE_CHECKING:
    from fleet.asimov.checking.interface import CheckerInterface
    from fleet.asimov.language.nodes import Cascade

__all__ = ["EFFECTS", "RUNGS", "VENDORS", "cascade_stmt"]

#: The repair ladder's rungs, lowest first: the one a cascade names cures it.
RUNGS = ("ignore", "restart_application", "reset_device", "reboot_host", "inspect_hardware")
VENDORS = ("nvidia", "amd")
EFFECTS = ("", "hang")
_FORM = 'kmsg("nvidia" or "amd", RUNG, step(AFTER_S, CODE, TEXT[, "hang"]), ...)'
_STEP = 'step(AFTER_S, "CODE", "TEXT") or step(AFTER_S, "CODE", "TEXT", "hang")'


def cascade_stmt(c: CheckerInterface, stmt: Cascade, index: int) -> None:
    """Checks one ``cascade FAULT = kmsg(...)`` and records the cascade."""
    name = stmt.fault.text
    if name in c.cascades:
        raise c.error(stmt.fault, f"cascade {name} is given twice", "one line per fault")
    call = stmt.value
    if not isinstance(call, Call) or call.function_name != "kmsg":
        raise c.error(call, "a cascade is kmsg(...)", _FORM)
    positional = [a for a in call.args if not isinstance(a, Keyword)]
    if len(positional) < 3:
        raise c.error(call, f"kmsg() takes a vendor, a rung and at least one step, got {len(positional)} argument(s)", _FORM)
    vendor = _string(c, positional[0], VENDORS, "vendor")
    needs = _string(c, positional[1], RUNGS, "rung")
    steps = [_step(c, s) for s in positional[2:]]
    cascade = {"vendor": vendor, "needs": needs, "steps": steps, "repeat": 1, "spare_rows": None, "exhausted": None}
    for kw in (a for a in call.args if isinstance(a, Keyword)):
        key = kw.name.text
        if key == "exhausted":
            cascade["exhausted"] = _step(c, kw.value)
        elif key in ("repeat", "spare_rows"):
            value = kw.value
            least = 1 if key == "repeat" else 0
            if not isinstance(value, Number) or not isinstance(value.value, int) or value.value < least:
                raise c.error(value, f"{key} must be a whole number >= {least}", f"{key}=2")
            cascade[key] = value.value
        else:
            raise c.error(kw.name, f"unknown keyword {key!r} of kmsg()", suggest(key, ("repeat", "spare_rows", "exhausted"), "a keyword"))
    if (cascade["spare_rows"] is None) != (cascade["exhausted"] is None):
        raise c.error(call, "spare_rows and exhausted go together", "both (the step written past the spares) or neither")
    c.cascades[name] = cascade


def _string(c: CheckerInterface, node, allowed: tuple[str, ...], what: str) -> str:
    if not isinstance(node, String) or node.value not in allowed:
        shown = repr(node.value) if isinstance(node, String) else "this"
        raise c.error(node, f"{shown} is no {what}", " or ".join(f'"{a}"' for a in allowed if a))
    return node.value


def _step(c: CheckerInterface, node) -> tuple:
    if not isinstance(node, Call) or node.function_name != "step":
        raise c.error(node, "a cascade's steps are step(...)", _STEP)
    args = node.args
    if not 3 <= len(args) <= 4 or any(isinstance(a, Keyword) for a in args):
        raise c.error(node, f"step() takes 3 or 4 arguments, got {len(args)}", _STEP)
    after = args[0]
    if isinstance(after, Neg) or not isinstance(after, Number) or isinstance(after.value, bool):
        raise c.error(after, "a step's delay is a number of seconds >= 0", _STEP)
    for part in args[1:3]:
        if not isinstance(part, String):
            raise c.error(part, "a step's code and text are strings", _STEP)
    effect = _string(c, args[3], EFFECTS, "step effect") if len(args) == 4 else ""
    return (after.value, args[1].value, args[2].value, effect)
