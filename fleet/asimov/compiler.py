"""The Asimov compiler: checks a spec against the Asicmon catalogue and emits a Python
monitor module (a `fleet.asicmon.monitor.DeviceMonitor` subclass).

It runs in stages, one module each:

* `parser` (with `grammar.lark` and `builder`) -- text to the typed tree of `nodes`, with
  friendly syntax errors;
* `checker` -- names, kinds and units against the catalogue, statement by statement
  (`statements`, `reads`, `actions`, `discovery`), expression by expression
  (`expressions`, `builtins`); it gives a `CheckedSpec`: the tree and what is known of each
  part of it (`values`, `units`);
* `codegen` -- the module text, from the checked tree.

A spec has four kinds of statement:

* ``const NAME = 42`` -- a constant;
* ``error CODE means "hung"`` -- how a driver error code maps to a driver status;
* bindings -- ``name = file("path", int)`` or ``a, b = lib.fn(handle, out, out)``: driver
  reads, evaluated every refresh, or once when prefixed by ``once``;
* ``stats.counter = expression`` -- catalogue counters, from bindings and other counters.

The checks: every name is defined above its use, every counter is in the catalogue and is
assigned once, values have the counter's kind and unit, every read is used.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from fleet.asimov.checking.checker import CheckedSpec, check
from fleet.asimov.codegen import emit
from fleet.asimov.errors import AsimovError, SpecErrors
from fleet.asimov.language.parser import parse
from fleet.asimov.rules import emit_machine

__all__ = ["CompiledSpec", "check_file", "check_spec", "compile_file", "compile_spec"]


@dataclass
class CompiledSpec:
    device: str
    source: str
    code: str
    counters: tuple[str, ...]
    error_status: dict[int, str]
    performance: dict[str, dict[str, float]] = field(default_factory=dict)
    state: dict[str, object] = field(default_factory=dict)  # the device double (fleet.asimov.state)
    fault_rules: dict[str, tuple] = field(default_factory=dict)
    step_rules: dict[str, tuple] = field(default_factory=dict)
    machine: str = ""  # the double's state machine, Python (fleet.asimov.rules)
    cascades: dict[str, dict] = field(default_factory=dict)  # driver-error faults (fleet.asimov.cascades)


def compile_spec(text: str, filename: str = "<spec>") -> CompiledSpec:
    """Compiles spec text; raises `AsimovError` (syntax) or `SpecErrors` (checks)."""
    checked = check(parse(text, filename), text, filename)
    return CompiledSpec(
        checked.device,
        checked.filename,
        emit(checked),
        checked.counters,
        dict(checked.error_status),
        {k: dict(v) for k, v in checked.performance.items()},
        dict(checked.state),
        dict(checked.fault_rules),
        dict(checked.step_rules),
        emit_machine(checked.device, checked.filename, {k: list(v) for k, v in checked.rules.items()}),
        dict(checked.cascades),
    )


def compile_file(path: str | Path) -> CompiledSpec:
    path = Path(path)
    return compile_spec(path.read_text(), str(path))


def check_file(path: str | Path) -> CheckedSpec:
    """Checks the spec at ``path`` (from any folder): parsing and checking only, no code is
    generated or run. Raises `AsimovError` (syntax) or `SpecErrors` (checks)."""
    path = Path(path)
    text = path.read_text()
    return check(parse(text, str(path)), text, str(path))


def check_spec(text: str, filename: str = "<spec>") -> list[AsimovError]:
    """All errors of a spec (empty when it is fine)."""
    try:
        check(parse(text, filename), text, filename)
    except AsimovError as exc:
        return [exc]
    except SpecErrors as exc:
        return exc.errors
    return []
