"""Device physics: workload drives core activity, activity drives power, power drives
temperature with thermal lag, heat throttles the clock, and counters integrate it all.

`DevicePhysics` is plain data (it is persisted as JSON); `advance` moves one device forward
in simulated time. All randomness comes from `emulator.noise`, keyed by the fleet seed,
the device and the time step, so the same sequence of `advance` calls always produces the
same states.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from emulator import noise
from emulator.devices.zoo import FAULTS, DeviceType, fault_number

__all__ = ["DevicePhysics", "advance", "demand", "new_state"]

MAX_STEP_S = 1.0  # integration step; long gaps use fewer, longer steps
MAX_STEPS = 240
ECC_BACKGROUND_PER_S = 2e-4
# What each fault changes (leak rate, ECC storm rates, link loss, cooler factor) is the
# device type's: its spec's ``fault`` lines (fleet.asimov.state), read by `fault_number`.
WORKLOAD_PHASE = {"video_pipeline": 0.83, "recommendation": 0.79, "transformer": 0.6}


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


def demand(t: float, workload: str, host_key: int = 0) -> float:
    """The daily demand curve of a workload at epoch time ``t``, in [0.05, 1].

    Traffic peaks in the evening (UTC), dips at night, and each host is a little offset.
    """
    day = t / 86400.0
    phase = WORKLOAD_PHASE.get(workload, 0.75) + ((host_key % 97) / 97.0 - 0.5) * 0.06
    level = 0.55 + 0.35 * math.cos(2 * math.pi * (day - phase))
    return min(1.0, max(0.05, level))


def new_state(dtype: DeviceType, serial: str, seed: int, t: float) -> DevicePhysics:
    """A freshly installed device, idle at ambient+idle temperature. Cycle counters start at
    a seeded offset of their width, so some devices wrap early in a run."""
    key = noise.mix(seed, noise.string_key(serial))
    width = 1 << dtype.counter_bits
    busy_width = 1 << 32
    temp = dtype.ambient_c + dtype.idle_w * dtype.thermal_resistance
    return DevicePhysics(
        serial=serial,
        type=dtype.name,
        key=key,
        t=t,
        temperature_c=temp,
        power_w=dtype.idle_w,
        clock_mhz=dtype.max_clock_mhz,
        core_activity=[0.0] * dtype.cores,
        core_active_cycles=[noise.mix(key, c, 2) % width for c in range(dtype.cores)],
        core_total_cycles=[noise.mix(key, c, 2) % width for c in range(dtype.cores)],
        core_busy_us=[noise.mix(key, c, 3) % busy_width for c in range(dtype.cores)],
        memory_used_bytes=dtype.model_memory_bytes,
        ecc_corrected=noise.mix(key, 4) % 50,
        stuck_core=noise.mix(key, 5) % dtype.cores,
    )


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
    """One step of ``dt`` seconds: activity, clock and power, temperature, counters, memory."""
    t = s.t + dt
    tick = int(t * 10)  # noise changes every 100 ms of simulated time
    rebooting = s.rebooting_until is not None and t < s.rebooting_until
    if s.rebooting_until is not None and not rebooting:
        s.rebooting_until = None
    serving = not (rebooting or "hang" in s.faults)
    h = noise.mix(s.key, tick)  # the step's draws share their leading keys
    wanted = d.job_load if s.job_until is not None and t < s.job_until else demand(t, workload, host_key)
    _activity(s, d, wanted, h, serving, rebooting)
    f = _clock_and_power(s, d, dt, h, rebooting)
    _temperature(s, d, dt)
    _counters(s, d, dt, h, f, items_per_s)
    _memory(s, d, dt, rebooting)
    s.t = t


def _activity(
    s: DevicePhysics, d: DeviceType, wanted: float, h: int, serving: bool, rebooting: bool
) -> None:
    """The load the device serves and each core's share of active time (``h``: the hash
    of the device and the time step, that every draw of the step continues)."""
    load = wanted * (d.activity_load_low + d.activity_load_span * noise.unit(noise.mix_on(h, 7))) if serving else 0.0
    load = min(1.0, load)
    if serving:
        mix_on, unit = noise.mix_on, noise.unit
        low, span = d.activity_core_low, d.activity_core_span
        activity = [min(1.0, max(0.0, load * (low + span * unit(mix_on(h, 100 + c))))) for c in range(d.cores)]
    else:
        activity = [0.0] * d.cores
    if "core_stuck" in s.faults and not rebooting:
        activity[s.stuck_core] = 1.0
    s.core_activity = activity
    s.load = load


def _clock_and_power(s: DevicePhysics, d: DeviceType, dt: float, h: int, rebooting: bool) -> float:
    """Clock (thermal throttling with hysteresis, a power cap) and power; the clock share."""
    mean_activity = sum(s.core_activity) / d.cores
    f = s.clock_mhz / d.max_clock_mhz
    f_min = d.min_clock_mhz / d.max_clock_mhz
    if s.temperature_c > d.throttle_c:
        f = max(f_min, f - d.throttle_down_per_s * dt * (1 + s.temperature_c - d.throttle_c))
        s.throttle_thermal = True
    elif s.temperature_c < d.throttle_c - d.throttle_hysteresis_c:
        f = min(1.0, f + d.throttle_up_per_s * dt)
        s.throttle_thermal = f < 1.0
    dynamic = (d.tdp_w - d.idle_w) * mean_activity * f**d.power_clock_exponent
    s.throttle_power = False
    if d.idle_w + dynamic > d.tdp_w * 1.1:  # never reached at nominal clocks; kept as a guard
        s.throttle_power = True
    idle = d.idle_w * (0.4 if rebooting else 1.0)
    power = idle + dynamic + d.idle_w * 0.03 * (noise.unit(noise.mix_on(h, 8)) - 0.5)
    s.power_w = max(0.0, power)
    s.clock_mhz = d.max_clock_mhz * f
    return f


def _temperature(s: DevicePhysics, d: DeviceType, dt: float) -> None:
    """First-order lag towards ambient + power x thermal resistance."""
    r_th = d.thermal_resistance * (fault_number(d, "overheat", 0) if "overheat" in s.faults else 1.0)
    target = d.ambient_c + s.power_w * r_th
    s.temperature_c += (target - s.temperature_c) * (1.0 - math.exp(-dt / d.thermal_tau_s))


def _counters(s: DevicePhysics, d: DeviceType, dt: float, h: int, f: float, items_per_s: float) -> None:
    """The monotonic counters: cycles, busy time, DMA, energy, work items, errors."""
    cycles = s.clock_mhz * 1e6 * dt
    whole = round(cycles)
    us = dt * 1e6
    total, active, busy = s.core_total_cycles, s.core_active_cycles, s.core_busy_us
    for c, a in enumerate(s.core_activity):
        total[c] += whole
        active[c] += round(cycles * a)
        busy[c] += round(us * a)
    link_gen, link_width = s.pcie_link(d)
    link_share = (link_gen * link_width) / (d.pcie_gen * d.pcie_width)
    dma = d.pcie_gbps * 1e9 * s.load * min(1.0, link_share * 2) * dt
    s.dma_to_device_bytes += round(dma)
    s.dma_from_device_bytes += round(dma * 0.1)
    s.energy_mj += round(s.power_w * dt * 1000)
    s.work_items += round(items_per_s * s.load * f * min(1.0, link_share * 2) * dt)
    storm = "ecc_storm" in s.faults
    ecc_rate = fault_number(d, "ecc_storm", 0) if storm else ECC_BACKGROUND_PER_S
    s.ecc_corrected += noise.poisson_of(ecc_rate * dt, noise.mix_on(h, 9))
    if storm:
        s.ecc_uncorrected += noise.poisson_of(fault_number(d, "ecc_storm", 1) * dt, noise.mix_on(h, 10))
    if "pcie_degraded" in s.faults:
        s.pcie_errors += noise.poisson_of(fault_number(d, "pcie_degraded", 2) * dt, noise.mix_on(h, 11))


def _memory(s: DevicePhysics, d: DeviceType, dt: float, rebooting: bool) -> None:
    """Resident model + working set + whatever a leaking driver lost."""
    if "memory_leak" in s.faults and not rebooting:
        s.leaked_bytes += round(d.memory_bytes * fault_number(d, "memory_leak", 0) * dt)
    resident = 0 if rebooting else d.model_memory_bytes + round(d.working_memory_bytes * s.load)
    s.memory_used_bytes = min(d.memory_bytes, resident + s.leaked_bytes)


def inject(state: DevicePhysics, fault: str, persistent: bool = False) -> None:
    if fault not in FAULTS:
        raise ValueError(f"unknown fault {fault!r}; expected one of {', '.join(FAULTS)}")
    state.faults[fault] = {"since": state.t, "persistent": persistent}


def clear(state: DevicePhysics, fault: str) -> None:
    """Clears a fault. Memory a leaking driver already lost stays lost until a reboot."""
    if fault not in FAULTS:
        raise ValueError(f"unknown fault {fault!r}; expected one of {', '.join(FAULTS)}")
    state.faults.pop(fault, None)


def occupy(state: DevicePhysics, until: float) -> None:
    """A distributed job runs on the device until ``until``: it serves at full load (and
    heats up, and throttles if it cannot shed the heat) instead of following demand."""
    state.job_until = max(until, state.job_until or until)


def ecc_rate(state: DevicePhysics, dtype: DeviceType) -> float:
    """Corrected ECC errors per second the device has now."""
    return fault_number(dtype, "ecc_storm", 0) if "ecc_storm" in state.faults else ECC_BACKGROUND_PER_S


def reboot(state: DevicePhysics, duration_s: float) -> None:
    """Takes the device away for ``duration_s``; transient faults and leaked memory are gone
    when it comes back (they are cleared now; the driver answers nothing until then)."""
    state.faults = {k: v for k, v in state.faults.items() if v.get("persistent")}
    state.leaked_bytes = 0
    state.rebooting_until = state.t + duration_s
    state.boots += 1
    state.throttle_thermal = False
