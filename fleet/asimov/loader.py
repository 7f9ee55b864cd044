"""Compiling a spec and loading the generated module as a monitor class."""

from __future__ import annotations

import sys
import types
from pathlib import Path

from fleet.asimov.compiler import CompiledSpec, compile_file, compile_spec
from fleet.asimov.runtime import DeviceMonitor

__all__ = ["load_monitor_class", "module_from_compiled", "monitor_class_from_text"]


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
