"""The base of the emulated drivers: a device binding, the narrow context a driver gets."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from emulator.config import DeviceSpec
from emulator.devices.physics import DevicePhysics

__all__ = ["DeviceBinding", "Driver", "DriverContext"]


@dataclass(frozen=True)
class DeviceBinding:
    """How a monitor reaches one device: what the generated Asimov module is given."""

    index: int
    files: Any = None  # has read_text(relative_path) -> str
    lib: Any = None  # a library object: module-like, functions as attributes


@dataclass(frozen=True)
class DriverContext:
    """What a driver may see of its host, and nothing more."""

    states: dict[str, DevicePhysics]  # the host's live states by serial (reloads keep the dict)
    devices: Mapping[str, DeviceSpec]  # the host's devices by serial
    hang_block_s: float  # how long a call to a hung device blocks before it times out
    reset: Callable[[str], None] | None = None  # resets a device by serial (what a driver's reset call does)

    def device(self, serial: str) -> DeviceSpec:
        return self.devices[serial]

    def reset_device(self, serial: str) -> None:
        if self.reset is None:
            raise RuntimeError("this host's drivers cannot reset devices")
        self.reset(serial)


class Driver:
    """Base of the emulated drivers of one host: builds a binding per device."""

    name = "driver"

    def __init__(self, ctx: DriverContext, serials: list[str]) -> None:
        self.ctx = ctx
        self.serials = serials  # devices of this driver on the host, in index order

    def bindings(self) -> dict[str, DeviceBinding]:
        raise NotImplementedError

    def block_while_hung(self) -> None:
        """What a hung device does to a caller: the call blocks until the driver's timeout."""
        time.sleep(self.ctx.hang_block_s)

    def describe(self, serial: str) -> dict[str, Any]:
        """A readable dump of what the driver shows for one device (for the CLI)."""
        raise NotImplementedError
