"""Fleet configuration and layout: which hosts exist and which devices they hold."""

from __future__ import annotations

from dataclasses import dataclass

from emulator.devices.zoo import device_type
from emulator.noise import mix

__all__ = ["DEFAULT_TYPES", "DeviceSpec", "FleetConfig", "HostSpec", "fleet_layout"]

#: The device types of a fleet when none are named (FLEET_TYPES, ``--types``).
DEFAULT_TYPES = ("video", "inference", "gpu")


@dataclass(frozen=True)
class FleetConfig:
    """Everything that decides a fleet; the same config always gives the same fleet.

    ``types`` cycle across the devices of the fleet so that every host holds a mix.
    ``hang_block_s`` is how long a driver call on a hung device blocks before it times
    out; ``reboot_s`` is how long a rebooting device stays away.
    """

    seed: int = 0
    hosts: int = 4
    devices_per_host: int = 8
    types: tuple[str, ...] = DEFAULT_TYPES
    hang_block_s: float = 2.0
    reboot_s: float = 60.0

    def __post_init__(self) -> None:
        if self.hosts < 0 or self.devices_per_host < 1:
            raise ValueError("a fleet has zero or more hosts, each with at least one device")
        if not self.types:
            raise ValueError("a fleet needs at least one device type")
        for name in self.types:
            device_type(name)  # raises KeyError naming the known types

    def host_name(self, host_index: int) -> str:
        width = max(2, len(str(self.hosts - 1)))
        return f"host-{host_index:0{width}d}"


@dataclass(frozen=True)
class DeviceSpec:
    serial: str
    type: str
    host: str
    index: int  # position on the host, 0..devices_per_host-1
    model: str
    sw_version: str
    firmware_version: str


@dataclass(frozen=True)
class HostSpec:
    name: str
    index: int
    devices: list[DeviceSpec]

    def device(self, serial: str) -> DeviceSpec:
        for d in self.devices:
            if d.serial == serial:
                return d
        raise KeyError(f"no device {serial!r} on {self.name}")


SW_VERSIONS = ("1.5", "2.0", "2.0", "2.1")


def host_spec(cfg: FleetConfig, host_index: int) -> HostSpec:
    name = cfg.host_name(host_index)
    devices = []
    for i in range(cfg.devices_per_host):
        n = host_index * cfg.devices_per_host + i
        dtype = device_type(cfg.types[n % len(cfg.types)])
        token = mix(cfg.seed, n, 0x5E1A1) & 0xFFFF
        serial = f"{dtype.serial_prefix}-{host_index:04d}-{i:02d}-{token:04x}"
        sw = SW_VERSIONS[mix(cfg.seed, n, 0x50F7) % len(SW_VERSIONS)]
        devices.append(
            DeviceSpec(serial, dtype.name, name, i, dtype.model, sw, dtype.firmware_for(sw))
        )
    return HostSpec(name, host_index, devices)


def fleet_layout(cfg: FleetConfig) -> list[HostSpec]:
    """The hosts of the fleet with their devices, deterministic from ``cfg``."""
    return [host_spec(cfg, h) for h in range(cfg.hosts)]


def find_host(cfg: FleetConfig, host_name: str) -> HostSpec:
    """The host named ``host_name``, read from its name (no scan of a large fleet)."""
    digits = host_name.removeprefix("host-")
    if digits.isdigit() and int(digits) < cfg.hosts and cfg.host_name(int(digits)) == host_name:
        return host_spec(cfg, int(digits))
    raise KeyError(
        f"no host {host_name!r} in this fleet (hosts {cfg.host_name(0)}..{cfg.host_name(cfg.hosts - 1)})"
    )
