"""A device type of the emulator: the hardware parameters and fault rules of one kind of
accelerator, as its Asimov spec's ``state``, ``rule`` and ``fault`` lines give them (a rule's
or fault's numbers are attributes named ``<rule>_<parameter>``, e.g. ``throttle_down_per_s``),
and the state machine its ``step`` and ``on`` lines compile into (``machine``)."""

from __future__ import annotations

from dataclasses import dataclass, field

from emulator.devices.runtime import Machine
from fleet.asimov.state import FAULT_EFFECTS, STEP_RULES

__all__ = ["FAULTS", "DeviceType", "fault_number"]

# Faults that can be injected; a reboot clears every fault that is not marked persistent.
FAULTS = tuple(FAULT_EFFECTS)  # overheat, hang, memory_leak, ecc_storm, pcie_degraded, core_stuck


@dataclass(frozen=True)
class DeviceType:
    name: str
    model: str
    serial_prefix: str
    driver: str  # key into emulator.devices.drivers.DRIVERS: "sysfs", "clib", "nvml", ...
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
    ecc_background_per_s: float = 2e-4  # corrected ECC errors a second with no fault
    driver_version: str = "1.0.0"
    firmware: dict[str, str] = field(default_factory=dict)  # sw version -> firmware version
    faults: dict[str, tuple] = field(default_factory=dict)  # fault -> its effect's numbers (spec)
    rules: dict[str, tuple] = field(default_factory=dict)  # step rule -> its numbers (spec)
    # the spec's update rules, compiled (emulator.devices.runtime.Machine)
    machine: Machine | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        # the step rules' numbers as plain attributes: the physics reads them every step
        for name, (_, params, defaults) in STEP_RULES.items():
            numbers = self.rules.get(name) or defaults
            for param, value in zip(params, numbers, strict=True):
                object.__setattr__(self, f"{name}_{param}", value)
        # and each fault's numbers, as the update rules read them (overheat_resistance_factor)
        for fault, (_, params, _) in FAULT_EFFECTS.items():
            for i, param in enumerate(params):
                object.__setattr__(self, f"{fault}_{param}", fault_number(self, fault, i))

    def firmware_for(self, sw_version: str) -> str:
        return self.firmware.get(sw_version, f"{sw_version}.0")

    @property
    def max_temperature_c(self) -> float:
        """An upper bound on the temperature this device can reach (with an overheat fault)."""
        factor = max(1.0, fault_number(self, "overheat", 0))
        return self.ambient_c + self.tdp_w * 1.15 * self.thermal_resistance * factor


def fault_number(dtype: DeviceType, fault: str, i: int) -> float:
    """The ``i``-th number of a fault's effect on this type (its spec's ``fault`` line, or
    the default of `fleet.asimov.state.FAULT_EFFECTS`)."""
    numbers = dtype.faults.get(fault)
    return numbers[i] if numbers else FAULT_EFFECTS[fault][2][i]
