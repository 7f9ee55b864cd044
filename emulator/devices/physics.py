"""Device physics: workload drives core activity, activity drives power, power drives
temperature with thermal lag, heat throttles the clock, and counters integrate it all.

The rules themselves are the device type's: the ``step`` and ``on`` lines of its Asimov spec,
compiled into a state machine (`fleet.asimov.rules`, `emulator.devices.runtime`). What stays
here is the runtime around them: `DevicePhysics`, the state, is plain data (it is persisted
as JSON); `advance` cuts a gap into time steps and runs the type's ``step`` on each;
`inject`, `clear`, `reboot` and `occupy` keep the faults' bookkeeping and run the type's
``on`` rules. All randomness comes from `emulator.noise`, keyed by the fleet seed,
the device and the time step, so the same sequence of `advance` calls always produces the
same states.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from emulator import noise
from emulator.devices.runtime import demand
from emulator.devices.zoo import FAULTS, DeviceType, fault_number

__all__ = ["DevicePhysics", "advance", "demand", "new_state"]

MAX_STEP_S = 1.0  # integration step; long gaps use fewer, longer steps
MAX_STEPS = 240
# What each fault changes (leak rate, ECC storm rates, link loss, cooler factor) is the
# device type's: its spec's ``fault`` lines (fleet.asimov.state), read by `fault_number`.


@dataclass
class DevicePhysics:
    """Everything that changes about one device. Counters are unbounded Python ints; the
    driver views expose them modulo the hardware counter width, so they wrap there."""

    serial: str
    type: str
    key: int  # stable integer identity for noise
    t: float  # simulated epoch seconds of this state
    temperature_c: float
    power_w: float
    clock_mhz: float
    throttle_thermal: bool = False
    throttle_power: bool = False
    core_activity: list[float] = field(default_factory=list)
    core_active_cycles: list[int] = field(default_factory=list)
    core_total_cycles: list[int] = field(default_factory=list)
    core_busy_us: list[int] = field(default_factory=list)
    memory_used_bytes: int = 0
    leaked_bytes: int = 0
    ecc_corrected: int = 0
    ecc_uncorrected: int = 0
    pcie_errors: int = 0
    dma_to_device_bytes: int = 0
    dma_from_device_bytes: int = 0
    energy_mj: int = 0
    work_items: int = 0
    load: float = 0.0
    faults: dict[str, dict] = field(
        default_factory=dict
    )  # name -> {"since": t, "persistent": bool}
    rebooting_until: float | None = None
    job_until: float | None = None  # a distributed job holds the device at full load until then
    boots: int = 0
    stuck_core: int = 0

    def to_json(self) -> dict:
        """The fields as JSON-ready values, sharing nothing with the state (a cheap
        `dataclasses.asdict`: every field is a number, a string, a list of numbers or the
        faults' dict of small dicts)."""
        data = dict(self.__dict__)
        for name in _LIST_FIELDS:
            data[name] = list(data[name])
        data["faults"] = {k: dict(v) for k, v in self.faults.items()}
        return data

    @classmethod
    def from_json(cls, data: dict) -> DevicePhysics:
        return cls(**data)

    def has(self, fault: str) -> bool:
        return fault in self.faults

    @property
    def rebooting(self) -> bool:
        return self.rebooting_until is not None and self.t < self.rebooting_until

    def pcie_link(self, dtype: DeviceType) -> tuple[int, int]:
        """(generation, width) of the PCIe link as trained now."""
        if self.has("pcie_degraded"):
            down, divisor = fault_number(dtype, "pcie_degraded", 0), fault_number(dtype, "pcie_degraded", 1)
            return max(1, dtype.pcie_gen - down), max(1, dtype.pcie_width // divisor)
        return dtype.pcie_gen, dtype.pcie_width


_LIST_FIELDS = ("core_activity", "core_active_cycles", "core_total_cycles", "core_busy_us")


def new_state(dtype: DeviceType, serial: str, seed: int, t: float) -> DevicePhysics:
    """A freshly installed device, as its type's ``on install`` rules start it (idle at
    ambient + idle temperature; cycle counters at a seeded offset of their width, so some
    devices wrap early in a run)."""
    key = noise.mix(seed, noise.string_key(serial))
    state = DevicePhysics(serial=serial, type=dtype.name, key=key, t=t, temperature_c=0.0, power_w=0.0, clock_mhz=0.0)
    dtype.machine.on_install(state, dtype, t)
    return state


def advance(
    state: DevicePhysics,
    dtype: DeviceType,
    t: float,
    workload: str,
    items_per_s: float,
    host_key: int = 0,
) -> None:
    """Moves ``state`` forward to time ``t`` (no-op if ``t`` is not later)."""
    gap = t - state.t
    if gap <= 0:
        return
    steps = min(MAX_STEPS, max(1, math.ceil(gap / MAX_STEP_S)))
    dt = gap / steps
    for _ in range(steps):
        _step(state, dtype, dt, workload, items_per_s, host_key)


def _step(
    s: DevicePhysics, d: DeviceType, dt: float, workload: str, items_per_s: float, host_key: int
) -> None:
    """One step of ``dt`` seconds: the type's spec-generated rules (activity, clock and power,
    temperature, counters, memory) move the state; the draws of the step continue the hash
    of the device and its 100 ms tick."""
    t = s.t + dt
    rebooting = s.rebooting_until is not None and t < s.rebooting_until
    d.machine.step(s, d, t, dt, noise.mix(s.key, int(t * 10)), rebooting, workload, host_key, items_per_s)
    s.t = t


def inject(state: DevicePhysics, fault: str, persistent: bool = False) -> None:
    if fault not in FAULTS:
        raise ValueError(f"unknown fault {fault!r}; expected one of {', '.join(FAULTS)}")
    state.faults[fault] = {"since": state.t, "persistent": persistent}


def clear(state: DevicePhysics, fault: str) -> None:
    """Clears a fault. Memory a leaking driver already lost stays lost until a reboot."""
    if fault not in FAULTS:
        raise ValueError(f"unknown fault {fault!r}; expected one of {', '.join(FAULTS)}")
    state.faults.pop(fault, None)


def occupy(state: DevicePhysics, dtype: DeviceType, until: float) -> None:
    """A distributed job runs on the device until ``until``: it serves at full load (and
    heats up, and throttles if it cannot shed the heat) instead of following demand."""
    dtype.machine.on_occupy(state, dtype, state.t, until)


def ecc_rate(state: DevicePhysics, dtype: DeviceType) -> float:
    """Corrected ECC errors per second the device has now."""
    return fault_number(dtype, "ecc_storm", 0) if "ecc_storm" in state.faults else dtype.ecc_background_per_s


def reboot(state: DevicePhysics, dtype: DeviceType, duration_s: float) -> None:
    """Takes the device away for ``duration_s``; transient faults and leaked memory are gone
    when it comes back (they are cleared now; the driver answers nothing until then)."""
    state.faults = {k: v for k, v in state.faults.items() if v.get("persistent")}
    dtype.machine.on_reboot(state, dtype, state.t, duration_s)
