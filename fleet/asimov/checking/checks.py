"""Checks shared by statements, expressions and built-ins: argument counts, units that
must agree, numbers where numbers are needed, and a counter's kind, unit and values."""

from __future__ import annotations

import ctypes
import difflib
import re
from typing import TYPE_CHECKING, Any

from fleet.asicmon.catalogue import CounterDef
from fleet.asimov.checking.units import parse_unit
from fleet.asimov.checking.values import ANY, Value, describe
from fleet.asimov.language.nodes import Node

if TYPE_CHECKING:
    from fleet.asimov.checking.interface import CheckerInterface

__all__ = [
    "check_arity",
    "check_attribute",
    "check_lib_function",
    "check_relative_path",
    "check_counter",
    "check_iterable",
    "require_numbers",
    "same_unit",
    "suggest",
]


def check_counter(c: CheckerInterface, counter: CounterDef, val: Value, node: Node) -> None:
    name = counter.name
    if counter.is_numeric:
        want = "list" if counter.per_core else "num"
        ok = val.vtype in ("any", want) or (want == "num" and val.vtype == "bool")
        if not ok:
            shape = "a list with one value per core" if counter.per_core else "a number"
            raise c.error(
                node,
                f"wrong kind: stats.{name} is a {counter.kind} and takes {shape}, but this is {describe(val.vtype)}",
                shape,
            )
        if counter.kind == "counter" and val.is_rate:
            raise c.error(
                node,
                f"wrong kind: stats.{name} is a counter (a monotonic total) but rate() and delta() give gauges",
                "the raw total read from the driver",
            )
        if val.unit is not ANY and val.unit is not None:
            want_unit = parse_unit(counter.unit)
            if not val.unit.same(want_unit):
                hint = (
                    f'; write convert(..., "{counter.unit}")'
                    if val.unit.same_dimension(want_unit)
                    else ""
                )
                raise c.error(
                    node,
                    f"wrong unit: the value is in {val.unit} but stats.{name} is in {counter.unit}{hint}",
                    f"a value in {counter.unit}",
                )
    else:
        if val.vtype not in ("any", "str"):
            raise c.error(
                node,
                f"wrong kind: stats.{name} is {describe(counter.kind)} counter and takes text, but this is {describe(val.vtype)}",
                "text, e.g. str(...)",
            )
        if counter.kind == "state" and val.literals is not None:
            for lit in val.literals:
                if lit not in counter.values:
                    raise c.error(
                        node,
                        f"wrong value: stats.{name} cannot be {lit!r}",
                        "one of " + ", ".join(repr(v) for v in counter.values),
                    )


# What a spec may reach through ``lib``: the driver's functions, named as C libraries name them,
# a lowercase prefix and then a capital or an underscore (nvmlInit, nx_get_power,
# rsmi_dev_temp_metric_get). Not the rest of what a binding exposes: a Python module's imports
# (pynvml does ``from ctypes import *``: raw memory, foreign calls), C library symbols a
# ctypes library resolves through its dependencies (libc's system, memset, posix_spawn), or
# Python's own attributes (``__class__``, ``__globals__``: every name starting with ``_``).
DRIVER_FUNCTION = re.compile(r"[a-z][a-z0-9]*(?:[A-Z][A-Za-z0-9_]*|_[A-Za-z0-9_]+)")
FORBIDDEN_LIB_PREFIXES = (
    "posix_", "pthread_", "shm_", "sched_", "process_", "memfd_", "pkey_", "open_", "dl_", "mq_",
    "sem_", "copy_", "remap_", "timer_", "epoll_", "inotify_", "get_", "set_", "string_", "create_",
    "c_", "py_", "py", "sys_", "os_", "exec", "spawn", "import_",
)
FORBIDDEN_LIB_NAMES = frozenset(n for n in dir(ctypes) if not n.startswith("_")) | frozenset({
    "os", "sys", "subprocess", "builtins", "importlib", "shutil", "socket", "pickle", "marshal",
    "threading", "multiprocessing", "io", "pathlib", "string", "types", "inspect", "code",
    "system", "popen", "fork", "forkpty", "kill", "killpg", "execv", "execve", "execl", "execlp",
    "execvp", "execvpe", "spawnv", "spawnve", "spawnl", "posix_spawn", "run", "call",
    "check_call", "check_output", "Popen", "getoutput", "getstatusoutput", "import_module",
    "eval", "exec", "compile", "open", "getattr", "setattr", "delattr", "globals", "locals",
    "vars", "breakpoint", "input", "remove", "unlink", "rmdir", "rmtree", "load", "loads",
})


def check_attribute(c: CheckerInterface, name: Node) -> None:
    """An attribute (``obj.name``) a spec may read: never one of Python's own (``_...``)."""
    if name.text.startswith("_"):
        raise c.error(
            name,
            f"attribute '{name.text}' starts with '_': a spec cannot reach Python's internals",
            "an attribute of the driver's values, without a leading underscore",
        )


def check_lib_function(c: CheckerInterface, name: Node, constant: bool = False) -> None:
    """``lib.name``: a function of the driver library, nothing else it exposes (or, where
    ``constant``, read not called, one of its ALL_CAPS constants)."""
    check_attribute(c, name)
    text = name.text
    if constant and re.fullmatch(r"[A-Z][A-Z0-9_]*", text) and text not in FORBIDDEN_LIB_NAMES:
        return
    if (
        text in FORBIDDEN_LIB_NAMES
        or text.startswith(FORBIDDEN_LIB_PREFIXES)
        or not DRIVER_FUNCTION.fullmatch(text)
    ):
        raise c.error(
            name,
            f"'lib.{text}' is not a driver function: a spec reaches only its driver's API through lib",
            "a driver function named with its library's prefix, e.g. lib.nvmlDeviceGetTemperature or lib.nx_get_power",
        )


def check_relative_path(c: CheckerInterface, node: Node, path: str, what: str) -> None:
    """A path a spec reads or writes: inside the device's folder (no ``/...``, no ``..``)."""
    if path.startswith(("/", "~")) or ".." in path.split("/") or "\\" in path:
        raise c.error(
            node,
            f"{what} must stay inside the device's folder: {path!r} leaves it",
            'a path relative to the device\'s folder, e.g. "hwmon/temp1_input"',
        )


def check_iterable(c: CheckerInterface, node: Node, it: Value) -> None:
    if it.vtype not in ("range", "list", "any"):
        raise c.error(node, f"cannot iterate over {describe(it.vtype)}", "range(n) or a list")


def check_arity(
    c: CheckerInterface,
    node: Node,
    fn: str,
    args: list,
    kwargs: dict,
    lo: int,
    hi: int | None = None,
    keywords: tuple[str, ...] = (),
) -> None:
    hi = lo if hi is None else hi
    for k in kwargs:
        if k not in keywords:
            raise c.error(
                node,
                f"{fn}() has no argument '{k}'",
                "arguments " + (", ".join(keywords) if keywords else "by position only"),
            )
    if not lo <= len(args) <= hi:
        n = str(lo) if lo == hi else f"{lo} to {hi}"
        raise c.error(
            node,
            f"{fn}() takes {n} argument{'s' * (hi != 1)}, not {len(args)}",
            f"{n} argument{'s' * (hi != 1)}",
        )


def same_unit(c: CheckerInterface, node: Node, vals: list[Value], what: str) -> Any:
    known = [v.unit for v in vals if v.unit is not ANY and v.unit is not None]
    for u in known[1:]:
        if not u.same(known[0]):
            raise c.error(
                node,
                f"unit mismatch: {what} are in {known[0]} and {u}",
                f'the same unit on both sides (use convert(x, "{known[0]}"))',
            )
    if known:
        return known[0]
    return None if all(v.unit is None for v in vals) else ANY


def require_numbers(c: CheckerInterface, operands: list[Node], vals: list[Value], op: str) -> None:
    for v, operand in zip(vals, operands, strict=True):
        if v.vtype not in ("num", "bool", "any"):
            raise c.error(operand, f"'{op}' needs numbers, not {describe(v.vtype)}", "a number")


def suggest(name: str, known: Any, what: str) -> str:
    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
    return f"{what} (did you mean '{close[0]}'?)" if close else what
