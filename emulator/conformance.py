"""A spec's generated simulator as the device under test of the conformance kit
(``python -m fleet.asimov conform SPEC --device sim``, `fleet.asimov.interface.conform`).

The double is built from the spec's own ``state``, ``fault``, ``step`` and ``cascade`` lines
(the same way the emulator's zoo builds its types), its monitor from the spec's counters and
actions, and the two are joined by the emulated driver the spec names (``state driver``).
The device lives in memory, on a clock the kit moves; it also tells the kit what it knows
and a real device cannot (how often it has booted), so an effect can be checked against the
truth. The zoo's own type of the same name is put back on `close`.
"""

from __future__ import annotations

from pathlib import Path

from emulator.config import FleetConfig
from emulator.devices.driver_errors import CASCADES, bus_address
from emulator.devices.spec_types import device_type_from_spec
from emulator.devices.zoo import DEVICE_TYPES, register_device_type
from emulator.host import EmulatedHost
from fleet.asimov.compiler import compile_file
from fleet.asimov.loader import module_from_compiled

__all__ = ["SimulatedDevice", "simulated_device"]


class NoSimulator(ValueError):
    """The spec describes no double (no ``state`` lines)."""


class SimulatedDevice:
    """One emulated device of a spec's type, with its monitor."""

    def __init__(self, spec: str | Path) -> None:
        compiled = compile_file(spec)
        if not compiled.state:
            raise NoSimulator(f"{spec} describes no simulator (it has no state lines); "
                              "conform it against a real device instead")
        self.device_type = compiled.device
        self._previous = DEVICE_TYPES.get(compiled.device)
        register_device_type(device_type_from_spec(compiled))
        try:
            cfg = FleetConfig(seed=1, hosts=1, devices_per_host=1, types=(compiled.device,))
            self.host = EmulatedHost(cfg, cfg.host_name(0))
            self.serial = self.host.spec.devices[0].serial
            binding = self.host.binding(self.serial)
            klass = module_from_compiled(compiled).Monitor
            self.monitor = klass(index=binding.index, files=binding.files, lib=binding.lib, serial=self.serial)
            self.monitor.bus_address = bus_address(self.host.spec.devices[0].index)
        except Exception:
            self.close()
            raise
        self.cascades = dict(compiled.cascades)
        self.reboot_s = cfg.reboot_s

    def advance(self, now: float) -> None:
        """Moves the device to ``now`` (a fresh device at the first call's time)."""
        self.host.sync(now)
        self.host.advance(now)

    def boots(self) -> int | None:
        return self.host.state(self.serial).boots

    def diagnose(self) -> tuple[bool, str] | None:
        return self.host.diagnose(self.serial)

    def driver_error(self) -> tuple[str, str] | None:
        """Starts one of the spec's driver-error cascades that leaves the device answering:
        (its fault, the rung it needs); None when the spec has none."""
        for name, cascade in self.cascades.items():
            if name in CASCADES and not any(step[3] for step in cascade["steps"]):
                self.host.inject_fault(self.serial, name)
                return name, cascade["needs"]
        return None

    def kernel_lines(self) -> list[str]:
        return self.host.take_kernel_log()

    def close(self) -> None:
        if self._previous is not None:
            DEVICE_TYPES[self.device_type] = self._previous
        else:
            DEVICE_TYPES.pop(self.device_type, None)
        self._previous = None


def simulated_device(spec: str | Path, argument: str = "") -> SimulatedDevice:
    """The kit's ``--device sim`` factory."""
    return SimulatedDevice(spec)
