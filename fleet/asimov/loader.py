"""Finding a device type's spec, compiling it, and loading the generated module as a
monitor class (cached per file version).

Loading runs the generated module, so only the checker stands between a spec and the
machine: it refuses every name a spec has not defined (but the built-ins, ``lib``, ``index``
and ``now``), every attribute starting with ``_``, calls of anything but the built-ins and the
driver's ``lib.<function>``, and paths outside the device's folder (docs/asimov.md, "What a
spec can reach"). Checking (`fleet.asimov.compiler.check_spec`, ``python -m fleet.asimov
check``) never runs anything. A class loaded from a file keeps the file as ``SPEC_FILE``; its
``diagnose`` command is run only when that file is in a spec folder (`diagnostic_argv`).
"""

from __future__ import annotations

import builtins
import os
import shlex
import sys
import threading
import types
from collections.abc import Iterable
from pathlib import Path

from fleet.asicmon.monitor import DeviceMonitor
from fleet.asimov.compiler import CompiledSpec, compile_file, compile_spec

__all__ = [
    "SPECS_DIR",
    "diagnostic_argv",
    "find_spec",
    "load_monitor_class",
    "module_from_compiled",
    "monitor_class",
    "monitor_class_from_text",
]

SPECS_DIR = Path(__file__).resolve().parent / "specs"
# What a generated module may use of Python's own (a second wall behind the checker): the
# built-in functions Asimov's built-ins compile to, the errors its guards catch, and imports
# of the modules its header names.
_IMPORTABLE = frozenset({"re", "fleet.asimov", "fleet.asimov.runtime"})
_SAFE_NAMES = (
    "abs", "all", "any", "bool", "float", "int", "len", "max", "min", "range", "round", "str", "sum",
    "None", "True", "False", "Exception", "TypeError", "ValueError", "ZeroDivisionError",
    "ArithmeticError", "IndexError", "KeyError", "AttributeError", "__build_class__",
)


def _import(name, globals=None, locals=None, fromlist=(), level=0):  # noqa: A002 - __import__'s own signature
    if level != 0 or name not in _IMPORTABLE:
        raise ImportError(f"a generated monitor cannot import {name!r}")
    return builtins.__import__(name, globals, locals, fromlist, level)


SAFE_BUILTINS = {name: getattr(builtins, name) for name in _SAFE_NAMES} | {"__import__": _import}
_CACHE: dict[tuple[str, int], type[DeviceMonitor]] = {}
_LOCK = threading.Lock()


def module_from_compiled(compiled: CompiledSpec) -> types.ModuleType:
    name = f"fleet.asimov.generated.{compiled.device}"
    module = types.ModuleType(name, f"Monitor module generated from {compiled.source}")
    module.__file__ = f"<asimov:{compiled.source}>"
    module.__dict__["__builtins__"] = dict(SAFE_BUILTINS)
    code = compile(compiled.code, module.__file__, "exec")
    exec(code, module.__dict__)
    sys.modules.setdefault(name, module)
    return module


def load_monitor_class(path: str | Path) -> type[DeviceMonitor]:
    """Compiles the spec at ``path`` and returns its generated ``Monitor`` class."""
    klass = module_from_compiled(compile_file(path)).Monitor
    klass.SPEC_FILE = Path(path).resolve()
    return klass


def diagnostic_argv(
    monitor: DeviceMonitor | type[DeviceMonitor], spec_dirs: Iterable[str | os.PathLike] = ()
) -> tuple[tuple[str, ...], str]:
    """The arguments of the monitor's ``diagnose`` command, to run without a shell, and why
    it is refused when it is: ``((), "")`` for a spec without one, ``((), reason)`` for a spec
    that was not loaded from a file in ``spec_dirs`` or the shipped specs (an upload, a spec
    compiled from text): such a spec may be checked and polled, never run a command."""
    argv = getattr(monitor, "DIAGNOSTIC", ())
    if not argv:
        return (), ""
    if isinstance(argv, str):  # a command line (a monitor written by hand): its words, no shell
        try:
            argv = tuple(shlex.split(argv))
        except ValueError as exc:
            return (), f"its diagnose command cannot be read ({exc})"
    if not isinstance(argv, tuple | list) or not argv or not all(isinstance(a, str) for a in argv):
        return (), "its diagnose command is not an argument list (recompile the spec)"
    argv = tuple(argv)
    source = getattr(monitor, "SPEC_FILE", None)
    folders = {Path(folder).resolve() for folder in (*spec_dirs, SPECS_DIR)}
    if source is None or Path(source).parent not in folders:
        where = source or getattr(monitor, "SOURCE", "text")
        return (), f"diagnose of {where} refused: only specs in the spec folders (ASIMOV_SPEC_DIRS) run commands"
    return argv, ""


def monitor_class_from_text(text: str, filename: str = "<spec>") -> type[DeviceMonitor]:
    return module_from_compiled(compile_spec(text, filename)).Monitor


def find_spec(device_type: str, spec_dirs: tuple[str | os.PathLike, ...] = ()) -> Path | None:
    for folder in (*spec_dirs, SPECS_DIR):
        path = Path(folder) / f"{device_type}.asimov"
        if path.exists():
            return path
    return None


def monitor_class(
    device_type: str, spec_dirs: tuple[str | os.PathLike, ...] = ()
) -> type[DeviceMonitor]:
    """The monitor class compiled from ``<device_type>.asimov``, looked for in ``spec_dirs``
    and then in the specs that ship with Asimov (cached per file version)."""
    path = find_spec(device_type, spec_dirs)
    if path is None:
        searched = ", ".join(str(p) for p in (*spec_dirs, SPECS_DIR))
        raise LookupError(
            f"no Asimov spec for device type {device_type!r}: looked for {device_type}.asimov in {searched}"
        )
    key = (str(path), path.stat().st_mtime_ns)
    with _LOCK:
        klass = _CACHE.get(key)
        if klass is None:
            klass = _CACHE[key] = load_monitor_class(path)
    return klass
