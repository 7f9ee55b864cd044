"""Driver interfaces of the emulated devices.

Each device type talks through one of these, as different vendors' drivers would:

* ``sysfs`` -- a tree of text files per device, formatted as kernel drivers format them
  (`emulator.devices.drivers.sysfs`);
* ``clib`` -- a C-library style API: open a handle, call functions that return a status
  code and fill out-parameters (`emulator.devices.drivers.clib`);
* ``nvml`` -- an API shaped like NVIDIA's NVML as seen through the nvidia-ml-py package
  (`emulator.devices.drivers.nvml`).

A monitor reaches a device through a `DeviceBinding`: its index among the devices of its
driver on the host, and either a file tree (``files``, anything with ``read_text(path)``)
or a library object (``lib``).
"""

from __future__ import annotations

from emulator.devices.drivers.base import DeviceBinding, Driver, DriverContext
from emulator.devices.drivers.clib import ClibDriver
from emulator.devices.drivers.nvml import NvmlDriver
from emulator.devices.drivers.sysfs import SysfsDriver

__all__ = ["DRIVERS", "DeviceBinding", "Driver", "DriverContext", "register_driver"]

# Every driver interface of the zoo by name (a device type names its driver).
DRIVERS: dict[str, type[Driver]] = {
    ClibDriver.name: ClibDriver,
    NvmlDriver.name: NvmlDriver,
    SysfsDriver.name: SysfsDriver,
}


def register_driver(cls: type[Driver]) -> type[Driver]:
    """Adds a driver interface for device types registered from outside the zoo."""
    DRIVERS[cls.name] = cls
    return cls
