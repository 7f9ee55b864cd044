"""The performance section of a spec: one fitted model per operator class.

::

    performance gemm = curve(latency_us=6.1, tflops=212.0, gbps=1650.0, fallback_us=38.0, kernels=412, error=0.071)

reads: a GEMM kernel on this device type takes ``latency_us + flops / tflops + bytes / gbps``
(a bandwidth--latency curve with two throughputs, fitted by least squares; see
``emulator.perf.model``); a kernel whose size is unknown takes ``fallback_us``. ``kernels``
and ``error`` say what the fit saw: how many kernels, and the median absolute error (a
fraction) on the kernels held out of it. Every parameter is a plain number written by
``python -m emulator fit --write``; the checker refuses unknown classes and parameters,
missing or negative values, and a class given twice, each at its line and column.

`with_performance` rewrites a spec's text with a new section (the rest unchanged).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING

from fleet.asimov.checking.checks import suggest
from fleet.asimov.language.nodes import Call, Keyword, Neg, Number, Performance

if TYPE_CHECKING:
    from fleet.asimov.checking.interface import CheckerInterface

__all__ = ["OP_CLASSES", "PARAMETERS", "performance_stmt", "render_performance", "with_performance"]

#: Operator classes a model may describe (the fitter's classes: emulator.perf.model).
OP_CLASSES = (
    "gemm", "conv", "attention", "elementwise", "reduction", "memory", "communication", "other",
)
#: Parameter -> (required, must be > 0 rather than >= 0, whole number).
PARAMETERS = {
    "latency_us": (True, False, False),
    "tflops": (False, True, False),
    "gbps": (False, True, False),
    "fallback_us": (False, False, False),
    "kernels": (False, False, True),
    "error": (False, False, False),
}
MODEL_FORM = "curve"
HEADER = "# performance model fitted by `python -m emulator fit`"


def performance_stmt(c: CheckerInterface, stmt: Performance, index: int) -> None:
    """Checks one ``performance CLASS = curve(...)`` statement and records its parameters."""
    name = stmt.op_class.text
    if name not in OP_CLASSES:
        raise c.error(stmt.op_class, f"unknown operator class {name!r}", suggest(name, OP_CLASSES, "an operator class"))
    if name in c.performance:
        raise c.error(stmt.op_class, f"performance {name} is given twice", "one model per operator class")
    model = stmt.model
    if not isinstance(model, Call) or model.function_name != MODEL_FORM:
        raise c.error(model, "a performance model must be a curve(...) of fitted numbers",
                      "curve(latency_us=..., tflops=..., gbps=...)")
    params: dict[str, float] = {}
    for arg in model.args:
        if not isinstance(arg, Keyword):
            raise c.error(arg, "curve() takes named parameters only", "name=number, e.g. latency_us=4.5")
        key = _parameter(c, arg, params)
        params[key] = _number(c, arg)
    if "latency_us" not in params:
        raise c.error(model, f"performance {name} has no latency_us", "latency_us=<microseconds>")
    c.performance[name] = params


def _parameter(c: CheckerInterface, arg: Keyword, seen: Mapping[str, float]) -> str:
    key = arg.name.text
    if key not in PARAMETERS:
        raise c.error(arg.name, f"unknown performance parameter {key!r}", suggest(key, PARAMETERS, "a parameter"))
    if key in seen:
        raise c.error(arg.name, f"parameter {key} is given twice", "each parameter once")
    return key


def _number(c: CheckerInterface, arg: Keyword) -> float:
    key, value = arg.name.text, arg.value
    _, positive, whole = PARAMETERS[key]
    if isinstance(value, Neg) and isinstance(value.operand, Number):
        raise c.error(value, f"{key} cannot be negative", "a number >= 0")
    if not isinstance(value, Number) or isinstance(value.value, bool):
        raise c.error(value, f"{key} must be a number", "a plain number, e.g. 12.5")
    if whole and not isinstance(value.value, int):
        raise c.error(value, f"{key} must be a whole number", "a count, e.g. 120")
    if positive and value.value <= 0:
        raise c.error(value, f"{key} must be more than 0", "a throughput > 0 (leave it out if unknown)")
    return value.value


def _fmt(key: str, value: float) -> str:
    if PARAMETERS[key][2]:
        return str(int(value))
    return f"{value:.6g}" if "e" not in f"{value:.6g}" else f"{value:.6e}"


def render_performance(model: Mapping[str, Mapping[str, float]], note: str = "") -> list[str]:
    """The spec lines of a model (class -> parameters), in the order of `OP_CLASSES`."""
    lines = [HEADER + (f": {note}" if note else "")]
    for name in OP_CLASSES:
        params = model.get(name)
        if not params:
            continue
        args = ", ".join(f"{k}={_fmt(k, params[k])}" for k in PARAMETERS if params.get(k) is not None)
        lines.append(f"performance {name} = {MODEL_FORM}({args})")
    return lines


_OLD_LINE = re.compile(r"^\s*(performance\s+\w+\s*=|" + re.escape(HEADER) + ")")


def with_performance(text: str, model: Mapping[str, Mapping[str, float]], note: str = "") -> str:
    """``text`` with its performance section replaced by ``model``'s (appended at the end;
    the old section's lines and its header comment go)."""
    kept = [line for line in text.splitlines() if not _OLD_LINE.match(line)]
    while kept and not kept[-1].strip():
        kept.pop()
    return "\n".join([*kept, "", *render_performance(model, note)]) + "\n"
