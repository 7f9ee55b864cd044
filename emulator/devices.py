"""Device types of the zoo: their hardware parameters and which driver interface they have.

A device type is data (cores, clocks, memory, power and thermal constants, counter widths)
plus the name of its driver interface. Onboarding a new emulated accelerator means
registering one more `DeviceType` (and, if its driver interface is new, a driver class in
`emulator.drivers`); the monitoring side then needs only an Asimov spec.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["DEVICE_TYPES", "FAULTS", "DeviceType", "device_type", "register_device_type"]

# Faults that can be injected; a reboot clears every fault that is not marked persistent.
FAULTS = ("overheat", "hang", "memory_leak", "ecc_storm", "pcie_degraded", "core_stuck")


@dataclass(frozen=True)
class DeviceType:
    name: str
    model: str
    serial_prefix: str
    driver: str  # key into emulator.drivers.DRIVERS: "sysfs", "clib", "nvml", ...
    cores: int
    max_clock_mhz: float
    min_clock_mhz: float
    memory_bytes: int
    model_memory_bytes: int  # resident weights / buffers when serving
    working_memory_bytes: int  # extra memory at full load
    idle_w: float
    tdp_w: float
    ambient_c: float = 30.0
    thermal_resistance: float = 0.5  # C per W at steady state
    thermal_tau_s: float = 40.0  # thermal time constant
    throttle_c: float = 90.0  # clocks come down above this temperature
    pcie_gen: int = 4
    pcie_width: int = 16
    pcie_gbps: float = 8.0  # DMA bandwidth used at full load, GB/s
    counter_bits: int = 48  # width of the hardware cycle counters
    driver_version: str = "1.0.0"
    firmware: dict[str, str] = field(default_factory=dict)  # sw version -> firmware version

    def firmware_for(self, sw_version: str) -> str:
        return self.firmware.get(sw_version, f"{sw_version}.0")

    @property
    def max_temperature_c(self) -> float:
        """An upper bound on the temperature this device can reach (with an overheat fault)."""
        return self.ambient_c + self.tdp_w * 1.15 * self.thermal_resistance * OVERHEAT_FACTOR


OVERHEAT_FACTOR = 3.0  # thermal resistance multiplier of a failed cooler

DEVICE_TYPES: dict[str, DeviceType] = {}


def register_device_type(dtype: DeviceType) -> DeviceType:
    """Adds a device type to the zoo (replacing one of the same name)."""
    DEVICE_TYPES[dtype.name] = dtype
    return dtype


def device_type(name: str) -> DeviceType:
    try:
        return DEVICE_TYPES[name]
    except KeyError:
        raise KeyError(
            f"unknown device type {name!r}; known types: {', '.join(sorted(DEVICE_TYPES))}"
        ) from None


GiB = 1 << 30

register_device_type(
    DeviceType(
        name="video",
        model="Emu VT-100",
        serial_prefix="EVT",
        driver="sysfs",
        cores=4,
        max_clock_mhz=1400,
        min_clock_mhz=400,
        memory_bytes=8 * GiB,
        model_memory_bytes=1 * GiB,
        working_memory_bytes=3 * GiB,
        idle_w=6.0,
        tdp_w=25.0,
        thermal_resistance=1.6,
        thermal_tau_s=30.0,
        throttle_c=85.0,
        pcie_gen=3,
        pcie_width=8,
        pcie_gbps=3.0,
        counter_bits=32,
        driver_version="vtdrv 1.4.0",
        firmware={"1.5": "3.1.7", "2.0": "3.2.1", "2.1": "3.2.4"},
    )
)
register_device_type(
    DeviceType(
        name="inference",
        model="Emu NX-1",
        serial_prefix="ENX",
        driver="clib",
        cores=8,
        max_clock_mhz=1000,
        min_clock_mhz=300,
        memory_bytes=16 * GiB,
        model_memory_bytes=6 * GiB,
        working_memory_bytes=4 * GiB,
        idle_w=9.0,
        tdp_w=40.0,
        thermal_resistance=1.2,
        thermal_tau_s=45.0,
        throttle_c=95.0,
        pcie_gen=4,
        pcie_width=4,
        pcie_gbps=6.0,
        counter_bits=48,
        driver_version="2.3.1",
        firmware={"1.5": "1.9.0", "2.0": "2.0.4", "2.1": "2.1.0"},
    )
)
register_device_type(
    DeviceType(
        name="gpu",
        model="Emu G-80",
        serial_prefix="EGX",
        driver="nvml",
        cores=8,  # graphics processing clusters
        max_clock_mhz=1980,
        min_clock_mhz=600,
        memory_bytes=80 * GiB,
        model_memory_bytes=20 * GiB,
        working_memory_bytes=40 * GiB,
        idle_w=60.0,
        tdp_w=400.0,
        thermal_resistance=0.13,
        thermal_tau_s=60.0,
        throttle_c=87.0,
        pcie_gen=4,
        pcie_width=16,
        pcie_gbps=24.0,
        counter_bits=64,
        driver_version="550.54.15",
        firmware={"1.5": "92.00.36.00.01", "2.0": "92.00.45.00.03", "2.1": "92.00.51.00.02"},
    )
)
