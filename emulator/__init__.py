"""The accelerator zoo: emulated hosts of video, inference and GPU-like accelerators.

Plain Python, no Django. Each device type has its own driver interface (sysfs-style files,
a C-library style API, an NVML-shaped API), physics (load, power, temperature, throttling,
counters), injectable faults, and a workload graph with a per-type cost model.
"""

from emulator.config import DeviceSpec, FleetConfig, HostSpec, fleet_layout
from emulator.devices.drivers import DeviceBinding
from emulator.devices.zoo import DEVICE_TYPES, FAULTS, DeviceType, register_device_type
from emulator.host import EmulatedHost

__all__ = [
    "DEVICE_TYPES",
    "FAULTS",
    "DeviceBinding",
    "DeviceSpec",
    "DeviceType",
    "EmulatedHost",
    "FleetConfig",
    "HostSpec",
    "fleet_layout",
    "register_device_type",
]
