"""A spec's driver double on its own: a host of its devices that answers the driver API the
spec's monitor reads (emulator.devices.spec_types turns the spec's state lines into its type)."""

from __future__ import annotations

from pathlib import Path

from emulator.config import FleetConfig
from emulator.devices.spec_types import compile_file, device_type_from_spec, register_cost
from emulator.devices.zoo import register_device_type
from emulator.host import EmulatedHost


def double(path: str | Path, seed: int = 0, devices: int = 1, t0: float = 1_700_000_000.0):
    """The driver double of the spec at ``path``: an `EmulatedHost` of ``devices`` devices
    of its type (registered as it is in the file), fresh at ``t0``. ``host.binding(serial)``
    answers the driver API the spec's monitor reads; ``host.advance(t)``,
    ``inject_fault``, ``reboot`` step its state machine; the same seed, the same states."""
    compiled = compile_file(path)
    if not compiled.state:
        raise ValueError(f"{path} describes no device double (no state lines)")
    dtype = register_device_type(device_type_from_spec(compiled))
    register_cost(compiled)
    host = EmulatedHost(FleetConfig(seed=seed, hosts=1, devices_per_host=devices, types=(dtype.name,)), "host-00")
    host.sync(t0)
    return host
