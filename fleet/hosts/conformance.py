"""Real devices of this machine as the conformance kit's device under test
(``python -m fleet.asimov conform SPEC --device files=FOLDER`` or ``--device nvml=INDEX``,
`fleet.asimov.interface.conform`).

A real device runs on the wall clock and cannot say how often it booted, so the kit checks
it only through its monitor. Its commands change real hardware: ``reboot`` and ``diagnose``
are run only when the argument ends in ``,commands`` (``--device nvml=0,commands``), and the
kit then waits 60 s for the device to come back (``,commands=SECONDS`` for another wait);
otherwise the report says they were not run.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from fleet.asimov.loader import load_monitor_class
from fleet.hosts.local import FileRoot

__all__ = ["RealDevice", "files_device", "nvml_device"]


class RealDevice:
    """A device of this machine read by the spec's monitor."""

    may_lack_counters = True  # an optional read the hardware does not have gives no value

    def __init__(self, monitor: Any, commands: float | None) -> None:
        self.monitor = monitor
        self.commands_allowed = commands is not None
        self.reboot_s = commands or 0.0

    def settle(self, seconds: float) -> None:
        """Waits for a reboot to finish."""
        time.sleep(seconds)

    def advance(self, now: float) -> None:
        """A real device keeps its own time: the kit's steps are a tenth of a second apart."""
        time.sleep(0.1)


def _options(argument: str) -> tuple[str, float | None]:
    """The device's argument and, with ``,commands[=SECONDS]``, how long a reboot may take."""
    value, _, flag = argument.partition(",")
    name, _, seconds = flag.partition("=")
    if flag and name != "commands":
        raise ValueError(f"unknown option {flag!r} (only commands or commands=SECONDS)")
    if not flag:
        return value, None
    try:
        wait = float(seconds) if seconds else 60.0
    except ValueError:
        raise ValueError(f"commands={seconds!r}: expected a number of seconds") from None
    return value, wait


def files_device(spec: str | Path, argument: str) -> RealDevice:
    """The device whose driver is the folder ``argument`` (an hwmon or sysfs folder)."""
    folder, commands = _options(argument)
    if not folder or not Path(folder).is_dir():
        raise ValueError(f"files={folder!r}: expected the device's folder (e.g. /sys/class/hwmon/hwmon0)")
    klass = load_monitor_class(spec)
    return RealDevice(klass(files=FileRoot(folder), serial=folder), commands)


def nvml_device(spec: str | Path, argument: str) -> RealDevice:
    """The NVIDIA GPU at NVML index ``argument``, through nvidia-ml-py."""
    index, commands = _options(argument or "0")
    import pynvml  # only where NVML is wanted: the package is optional  # noqa: PLC0415

    klass = load_monitor_class(spec)
    return RealDevice(klass(index=int(index), lib=pynvml, serial=f"nvml:{index}"), commands)
