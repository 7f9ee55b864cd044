"""The video accelerator's driver: a sysfs-style tree of text files, one directory per device.

Values are formatted on demand when a file is read, the way a kernel driver's ``show``
callbacks format them: decimal, hex with a ``0x`` prefix, numbers with a unit suffix
("12345 mW"), several values on one line ("ce 12 ue 0") or one per line ("key value").
`VirtualSysfs.materialise` writes the same tree as real files, for tools that want a
directory on disk.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from emulator.devices.drivers.base import DeviceBinding, Driver
from emulator.devices.physics import DevicePhysics
from emulator.devices.zoo import DeviceType, device_type

Formatter = Callable[[DevicePhysics], str]

PCIE_SPEED = {
    1: "2.5 GT/s PCIe",
    2: "5.0 GT/s PCIe",
    3: "8.0 GT/s PCIe",
    4: "16.0 GT/s PCIe",
    5: "32.0 GT/s PCIe",
}
THROTTLE_THERMAL = 0x1
THROTTLE_POWER = 0x2
U32 = (1 << 32) - 1


class VirtualSysfs:
    """One device's directory. ``read_text(path)`` formats the value at the time of the read."""

    def __init__(self, driver: SysfsDriver, serial: str, files: dict[str, Formatter]) -> None:
        self._driver = driver
        self._states = driver.ctx.states
        self._serial = serial
        self._files = files
        self.name = f"{driver.dir_prefix}{driver.serials.index(serial)}"

    def write_text(self, path: str, text: str) -> None:
        """Only ``reset`` is writable: writing 1 resets the device (it is off the bus,
        ENODEV, until it is back). Works on a hung device too."""
        if path != "reset":
            raise OSError(errno.EACCES, "permission denied", path)
        if text.strip() != "1":
            raise OSError(errno.EINVAL, "invalid argument", path)
        self._driver.ctx.reset_device(self._serial)

    def read_text(self, path: str) -> str:
        state = self._states[self._serial]
        if state.faults and "hang" in state.faults:
            self._driver.block_while_hung()
            raise OSError(errno.ETIMEDOUT, "device not responding", path)
        if state.rebooting_until is not None and state.rebooting:
            raise OSError(errno.ENODEV, "no such device", path)
        try:
            fmt = self._files[path]
        except KeyError:
            raise FileNotFoundError(errno.ENOENT, "no such file", path) from None
        return fmt(state)

    def paths(self) -> list[str]:
        return sorted(self._files)

    def materialise(self, root: str | os.PathLike) -> Path:
        """Writes the tree as it reads now under ``root/<name>/`` and returns that folder."""
        base = Path(root) / self.name
        state = self._states[self._serial]
        for rel, fmt in self._files.items():
            target = base / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp = target.with_name(target.name + ".tmp")
            tmp.write_text(fmt(state))
            tmp.replace(target)
        return base


class SysfsDriver(Driver):
    """Text files per device, in the layout of the emulated VT-100 video accelerator."""

    name = "sysfs"
    dir_prefix = "vt"

    def bindings(self) -> dict[str, DeviceBinding]:
        out = {}
        for i, serial in enumerate(self.serials):
            spec = self.ctx.device(serial)
            files = self.layout(device_type(spec.type), spec)
            out[serial] = DeviceBinding(index=i, files=VirtualSysfs(self, serial, files))
        return out

    def layout(self, d: DeviceType, spec: Any) -> dict[str, Formatter]:
        files: dict[str, Formatter] = {
            "name": lambda s: f"{d.model}\n",
            "serial": lambda s: f"{spec.serial}\n",
            "firmware_version": lambda s: f"{spec.firmware_version}\n",
            "driver/version": lambda s: f"{d.driver_version} (built 2024-03-02)\n",
            "num_cores": lambda s: f"{d.cores}\n",
            "freq": lambda s: (
                f"cur: {round(s.clock_mhz)} MHz\nmin: {round(d.min_clock_mhz)} MHz\nmax: {round(d.max_clock_mhz)} MHz\n"
            ),
            "hwmon/temp1_input": lambda s: f"{round(s.temperature_c * 1000)}\n",
            "hwmon/temp1_crit": lambda s: f"{round(d.throttle_c * 1000)}\n",
            "power": lambda s: f"{round(s.power_w * 1000)} mW\n",
            "power_cap": lambda s: f"{round(d.tdp_w * 1000)} mW\n",
            "energy_uj": lambda s: f"{(s.energy_mj * 1000) & U32}\n",
            "mem_info": lambda s: (
                f"total {d.memory_bytes} used {s.memory_used_bytes} free {d.memory_bytes - s.memory_used_bytes}\n"
            ),
            "ecc": lambda s: f"ce {s.ecc_corrected & U32} ue {s.ecc_uncorrected & U32}\n",
            "throttle_status": lambda s: (
                f"0x{(THROTTLE_THERMAL if s.throttle_thermal else 0) | (THROTTLE_POWER if s.throttle_power else 0):08x}\n"
            ),
            "frames_done": lambda s: f"{s.work_items}\n",
            "dma_stats": lambda s: f"in {s.dma_to_device_bytes} out {s.dma_from_device_bytes}\n",
            "pcie/current_link_speed": lambda s: (
                f"{PCIE_SPEED.get(s.pcie_link(d)[0], 'Unknown')}\n"
            ),
            "pcie/current_link_width": lambda s: f"{s.pcie_link(d)[1]}\n",
            "pcie/max_link_width": lambda s: f"{d.pcie_width}\n",
            "pcie/aer_dev_correctable": lambda s: _aer(s.pcie_errors),
        }
        for c in range(d.cores):
            files[f"core{c}/busy_us"] = lambda s, c=c: f"{s.core_busy_us[c] & U32}\n"
        return files

    def describe(self, serial: str) -> dict[str, Any]:
        files = self.bindings()[serial].files
        out = {}
        for path in files.paths():
            try:
                out[path] = files.read_text(path).rstrip("\n")
            except OSError as exc:
                out[path] = f"<{exc.strerror}>"
        return out


def _aer(total: int) -> str:
    """The layout of Linux's aer_dev_correctable: one "name count" line per error kind."""
    bad_tlp = total * 3 // 5
    bad_dllp = total - bad_tlp
    lines = [
        "RxErr 0",
        f"BadTLP {bad_tlp}",
        f"BadDLLP {bad_dllp}",
        "Rollover 0",
        "Timeout 0",
        "NonFatalErr 0",
    ]
    lines += ["CorrIntErr 0", "HeaderOF 0", f"TOTAL_ERR_COR {total}"]
    return "\n".join(lines) + "\n"
