"""Device types of the zoo: their hardware parameters and which driver interface they have.

A device type is data (cores, clocks, memory, power and thermal constants, counter widths,
what each fault changes) plus the name of its driver interface. Every type is read from the
``state`` and ``fault`` lines of its Asimov spec (`emulator.devices.spec_types`), so onboarding a new
emulated accelerator is one spec file: the same file gives its monitor. Only a driver
interface that is new needs a driver class in `emulator.devices.drivers`.
"""

from __future__ import annotations

from dataclasses import replace

from emulator.devices.device_type import FAULTS, DeviceType, fault_number
from emulator.devices.spec_types import types_from_specs
from emulator.perf.model import spec_dirs

__all__ = ["DEVICE_TYPES", "FAULTS", "DeviceType", "device_type", "fault_number", "register_device_type"]

DEVICE_TYPES: dict[str, DeviceType] = {}
STANDARD_RULES = "gpu"  # whose rules a type without any runs


def register_device_type(dtype: DeviceType) -> DeviceType:
    """Adds a device type to the zoo (replacing one of the same name). A type written in
    Python with no update rules of its own runs those of the shipped specs (as gpu.asimov
    has them: every shipped double has the same ``step`` and ``on`` lines)."""
    if dtype.machine is None and STANDARD_RULES in DEVICE_TYPES:
        dtype = replace(dtype, machine=DEVICE_TYPES[STANDARD_RULES].machine)
    DEVICE_TYPES[dtype.name] = dtype
    return dtype


def device_type(name: str) -> DeviceType:
    try:
        return DEVICE_TYPES[name]
    except KeyError:
        raise KeyError(
            f"unknown device type {name!r}; known types: {', '.join(sorted(DEVICE_TYPES))}"
        ) from None


# The shipped types (video, inference, gpu) and any new one come from their Asimov specs:
# fleet/asimov/specs/<type>.asimov and ASIMOV_SPEC_DIRS, their ``state`` and ``fault`` lines.
for _dtype in types_from_specs(spec_dirs()):
    register_device_type(_dtype)
