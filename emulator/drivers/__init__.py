"""Driver interfaces of the emulated devices.

Each device type talks through one of these, as different vendors' drivers would:

* ``sysfs`` -- a tree of text files per device, formatted as kernel drivers format them
  (`emulator.drivers.sysfs`);
* ``clib`` -- a C-library style API: open a handle, call functions that return a status
  code and fill out-parameters (`emulator.drivers.clib`);
* ``nvml`` -- an API shaped like NVIDIA's NVML as seen through the nvidia-ml-py package
  (`emulator.drivers.nvml`).

A monitor reaches a device through a `DeviceBinding`: its index among the devices of its
driver on the host, and either a file tree (``files``, anything with ``read_text(path)``)
or a library object (``lib``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from emulator.host import EmulatedHost

__all__ = ["DRIVERS", "DeviceBinding", "register_driver"]


@dataclass(frozen=True)
class DeviceBinding:
    """How a monitor reaches one device: what the generated Asimov module is given."""

    index: int
    files: Any = None  # has read_text(relative_path) -> str
    lib: Any = None  # a library object: module-like, functions as attributes


class Driver:
    """Base of the emulated drivers of one host: builds a binding per device."""

    name = "driver"

    def __init__(self, host: EmulatedHost, serials: list[str]) -> None:
        self.host = host
        self.serials = serials  # devices of this driver on the host, in index order

    def bindings(self) -> dict[str, DeviceBinding]:
        raise NotImplementedError

    def block_while_hung(self) -> None:
        """What a hung device does to a caller: the call blocks until the driver's timeout."""
        time.sleep(self.host.cfg.hang_block_s)

    def describe(self, serial: str) -> dict[str, Any]:
        """A readable dump of what the driver shows for one device (for the CLI)."""
        raise NotImplementedError


DRIVERS: dict[str, type[Driver]] = {}


def register_driver(cls: type[Driver]) -> type[Driver]:
    DRIVERS[cls.name] = cls
    return cls


def _load_builtin() -> None:
    from emulator.drivers import clib, nvml, sysfs  # noqa: F401  (they register themselves)


_load_builtin()
