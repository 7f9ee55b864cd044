"""The small runtime a spec's generated state machine runs on (`fleet.asimov.rules` writes
the machine's Python, which imports these): the seeded draws and the workload's daily
demand curve, and `load_machine`, which turns a compiled spec's machine text into its
functions."""

from __future__ import annotations

import builtins
import math
from dataclasses import dataclass

from emulator.noise import mix, mix_on, poisson_of, unit

__all__ = ["Machine", "demand", "load_machine", "mix", "mix_on", "poisson", "unit"]

poisson = poisson_of  # poisson(mean, key): a Poisson count drawn from a key
WORKLOAD_PHASE = {"video_pipeline": 0.83, "recommendation": 0.79, "transformer": 0.6}


def demand(t: float, workload: str, host_key: int = 0) -> float:
    """The daily demand curve of a workload at epoch time ``t``, in [0.05, 1].

    Traffic peaks in the evening (UTC), dips at night, and each host is a little offset.
    """
    day = t / 86400.0
    phase = WORKLOAD_PHASE.get(workload, 0.75) + ((host_key % 97) / 97.0 - 0.5) * 0.06
    level = 0.55 + 0.35 * math.cos(2 * math.pi * (day - phase))
    return min(1.0, max(0.05, level))


@dataclass(frozen=True)
class Machine:
    """A double's state machine: ``step`` every time step, ``on_<command>`` per command
    (a command the spec gives no rules does nothing)."""

    source: str
    step: object
    on_install: object
    on_reboot: object
    on_occupy: object


def _nothing(*args) -> None:
    return None


# What a generated machine module may use of Python (behind the checks of fleet.asimov.rules):
# the functions of the update rules and imports of the two modules its header names.
_MACHINE_IMPORTS = frozenset({"math", "emulator.devices.runtime"})


def _machine_import(name, globals=None, locals=None, fromlist=(), level=0):  # noqa: A002 - __import__'s signature
    if level != 0 or name not in _MACHINE_IMPORTS:
        raise ImportError(f"a device double's state machine cannot import {name!r}")
    return builtins.__import__(name, globals, locals, fromlist, level)


MACHINE_BUILTINS = {name: getattr(builtins, name) for name in ("abs", "len", "max", "min", "range", "round", "sum")}
MACHINE_BUILTINS["__import__"] = _machine_import


def load_machine(code: str, source: str) -> Machine:
    """The functions of a spec's generated machine module (``code``; ``source`` names the
    spec in tracebacks), run with only `MACHINE_BUILTINS`."""
    namespace: dict = {"__builtins__": dict(MACHINE_BUILTINS)}
    exec(compile(code, f"<state machine of {source}>", "exec"), namespace)  # noqa: S102 - our own generated code
    on = {c: namespace.get(f"on_{c}", _nothing) for c in ("install", "reboot", "occupy")}
    return Machine(source, namespace["step"], on["install"], on["reboot"], on["occupy"])
