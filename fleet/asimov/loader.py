"""Finding a device type's spec, compiling it, and loading the generated module as a
monitor class (cached per file version)."""

from __future__ import annotations

import os
import sys
import threading
import types
from pathlib import Path

from fleet.asicmon.monitor import DeviceMonitor
from fleet.asimov.compiler import CompiledSpec, compile_file, compile_spec

__all__ = [
    "SPECS_DIR",
    "find_spec",
    "load_monitor_class",
    "module_from_compiled",
    "monitor_class",
    "monitor_class_from_text",
]

SPECS_DIR = Path(__file__).resolve().parent / "specs"
_CACHE: dict[tuple[str, int], type[DeviceMonitor]] = {}
_LOCK = threading.Lock()


def module_from_compiled(compiled: CompiledSpec) -> types.ModuleType:
    name = f"fleet.asimov.generated.{compiled.device}"
    module = types.ModuleType(name, f"Monitor module generated from {compiled.source}")
    module.__file__ = f"<asimov:{compiled.source}>"
    code = compile(compiled.code, module.__file__, "exec")
    exec(code, module.__dict__)
    sys.modules.setdefault(name, module)
    return module


def load_monitor_class(path: str | Path) -> type[DeviceMonitor]:
    """Compiles the spec at ``path`` and returns its generated ``Monitor`` class."""
    return module_from_compiled(compile_file(path)).Monitor


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
