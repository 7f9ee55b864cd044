"""Device types from their Asimov specs: the double's state and fault rules become a
`DeviceType` the runtime (`emulator.devices.physics`, `emulator.devices.drivers`) runs.

A spec with ``state`` lines (`fleet.asimov.state`) describes an emulated device; every such
spec among the shipped ones and in ``ASIMOV_SPEC_DIRS`` is registered when the emulator is
imported, so a new type is one spec file: its monitor, its double, its cost model.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path

from emulator.devices.device_type import DeviceType
from emulator.devices.runtime import load_machine
from emulator.workloads.graph import CostProfile, register_cost_profile
from fleet.asimov.compiler import CompiledSpec, compile_file
from fleet.asimov.errors import AsimovError, SpecErrors
from fleet.asimov.loader import SPECS_DIR

__all__ = ["cascades_from_specs", "compiled_specs", "device_type_from_spec", "spec_paths", "types_from_specs"]

log = logging.getLogger(__name__)

_HAS_STATE = re.compile(r"^state\s+\w+\s*=", re.M)
_COST = ("workload", "peak_tflops", "mem_gbps", "launch_us")


def spec_paths(extra_dirs: tuple[str, ...] = ()) -> list[Path]:
    """Specs that describe a double (a cheap look for ``state`` lines before compiling);
    a spec in an extra folder replaces a shipped one of the same name."""
    found: dict[str, Path] = {}
    for folder in (SPECS_DIR, *extra_dirs):
        for path in sorted(Path(folder).glob("*.asimov")):
            if _HAS_STATE.search(path.read_text()):
                found[path.stem] = path
    return list(found.values())


def device_type_from_spec(compiled: CompiledSpec) -> DeviceType:
    """The `DeviceType` a compiled spec's state and fault rules describe."""
    fields = {k: v for k, v in compiled.state.items() if k not in _COST}
    machine = load_machine(compiled.machine, compiled.source) if compiled.machine else None
    return DeviceType(name=compiled.device, faults=dict(compiled.fault_rules), rules=dict(compiled.step_rules),
                      machine=machine, **fields)


def register_cost(compiled: CompiledSpec) -> None:
    if "workload" not in compiled.state:
        return
    s = compiled.state
    register_cost_profile(
        compiled.device,
        CostProfile(workload=s["workload"], peak_tflops=s["peak_tflops"], mem_gbps=s["mem_gbps"],
                    pcie_gbps=s.get("pcie_gbps", 8.0), launch_us=s["launch_us"]),
    )


_COMPILED: dict[tuple[str, int], CompiledSpec] = {}  # (path, mtime) -> the spec compiled


def compiled_specs(extra_dirs: tuple[str, ...] = ()) -> list[CompiledSpec]:
    """Every spec that describes a double, compiled (once for each version of its file). A
    broken spec in an extra folder is logged with its line and column and left out."""
    out = []
    for path in spec_paths(extra_dirs):
        key = (str(path), path.stat().st_mtime_ns)
        compiled = _COMPILED.get(key)
        if compiled is None:
            try:
                compiled = _COMPILED[key] = compile_file(path)
            except (AsimovError, SpecErrors) as exc:
                if path.parent == SPECS_DIR:
                    raise  # a shipped spec must compile
                log.error("device type of %s left out: %s", path, exc)  # as the agent does
                continue
        out.append(compiled)
    return out


def types_from_specs(extra_dirs: tuple[str, ...] = ()) -> list[DeviceType]:
    """The type of every spec that describes a double (their cost models registered)."""
    out = []
    for compiled in compiled_specs(extra_dirs):
        out.append(device_type_from_spec(compiled))
        register_cost(compiled)
    return out


def cascades_from_specs(extra_dirs: tuple[str, ...] = ()) -> dict[str, dict]:
    """The driver-error cascades of the specs (fault -> its ``cascade`` line, as
    `fleet.asimov.cascades` records it), in the order of the specs and their lines; a fault
    two specs describe keeps the first one's."""
    out: dict[str, dict] = {}
    for compiled in compiled_specs(extra_dirs):
        for name, cascade in compiled.cascades.items():
            out.setdefault(name, cascade)
    return out
