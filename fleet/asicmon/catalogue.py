"""The Asicmon counter catalogue: the standard counters every device type is monitored by.

A counter has a name, a unit, a kind and a description:

* ``gauge`` -- a value at sample time (temperature, utilization, a rate);
* ``counter`` -- a monotonic total as the hardware counts it (may wrap at its width);
* ``info`` -- text that rarely changes (firmware version);
* ``state`` -- one of a fixed set of values (driver status).

Specs fill catalogue counters; tools read them by name without knowing the device.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

__all__ = [
    "CATALOGUE",
    "ALWAYS_PRESENT",
    "RUNTIME_COUNTERS",
    "CounterDef",
    "KINDS",
    "DRIVER_STATUSES",
]

KINDS = ("gauge", "counter", "info", "state")
SERIES_KINDS = frozenset({"gauge", "counter"})  # the kinds that are numbers worth a time series
DRIVER_STATUSES = ("ok", "hung", "rebooting", "error")
THROTTLE_REASONS = ("none", "idle", "thermal", "power", "thermal,power")
LINK_STATUSES = ("ok", "degraded")


@dataclass(frozen=True)
class CounterDef:
    """One counter of the catalogue (the `fleet.models.Counter` table mirrors these rows)."""

    name: str
    unit: str  # "1" for a plain ratio or number without unit
    kind: str
    description: str
    per_core: bool = False  # the value is a list with one entry per compute core
    values: tuple[str, ...] = ()  # the allowed values of a state counter
    dcgm: str = ""  # the NVIDIA DCGM field for the same quantity, if there is one

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"counter {self.name}: kind must be one of {KINDS}")

    @property
    def is_numeric(self) -> bool:
        """A number worth a time series (a gauge or a counter, not a string or a state)."""
        return self.kind in SERIES_KINDS



_COUNTERS = [
    # -- performance -----------------------------------------------------------------
    CounterDef(
        "device_utilization",
        "1",
        "gauge",
        "How busy the device is: the busiest core's active time over elapsed time, 0..1.",
        dcgm="DCGM_FI_DEV_GPU_UTIL (percent)",
    ),
    CounterDef(
        "core_utilization",
        "1",
        "gauge",
        "Active time over elapsed time of each compute core, 0..1.",
        per_core=True,
    ),
    CounterDef("core_count", "1", "gauge", "Number of compute cores."),
    CounterDef(
        "work_items_total",
        "count",
        "counter",
        "Work items (inferences, frames, sequences) completed since power-on.",
    ),
    CounterDef(
        "work_items_per_s",
        "count/s",
        "gauge",
        "Work items completed per second over the last refresh interval.",
    ),
    CounterDef(
        "dma_to_device_bytes_total",
        "B",
        "counter",
        "Bytes moved host to device by DMA since power-on.",
        dcgm="DCGM_FI_PROF_PCIE_RX_BYTES (a rate)",
    ),
    CounterDef(
        "dma_from_device_bytes_total",
        "B",
        "counter",
        "Bytes moved device to host by DMA since power-on.",
        dcgm="DCGM_FI_PROF_PCIE_TX_BYTES (a rate)",
    ),
    CounterDef(
        "dma_to_device_bytes_per_s",
        "B/s",
        "gauge",
        "Host to device DMA throughput over the last refresh interval.",
        dcgm="DCGM_FI_PROF_PCIE_RX_BYTES",
    ),
    CounterDef(
        "dma_from_device_bytes_per_s",
        "B/s",
        "gauge",
        "Device to host DMA throughput over the last refresh interval.",
        dcgm="DCGM_FI_PROF_PCIE_TX_BYTES",
    ),
    # -- thermal, power, clocks ----------------------------------------------------------
    CounterDef("temperature_c", "C", "gauge", "Die temperature.", dcgm="DCGM_FI_DEV_GPU_TEMP"),
    CounterDef(
        "temperature_limit_c",
        "C",
        "gauge",
        "Temperature above which the device slows its clocks.",
        dcgm="DCGM_FI_DEV_SLOWDOWN_TEMP",
    ),
    CounterDef(
        "power_w", "W", "gauge", "Power drawn by the device.", dcgm="DCGM_FI_DEV_POWER_USAGE"
    ),
    CounterDef(
        "power_limit_w",
        "W",
        "gauge",
        "Power limit the device enforces.",
        dcgm="DCGM_FI_DEV_POWER_MGMT_LIMIT",
    ),
    CounterDef(
        "energy_j_total",
        "J",
        "counter",
        "Energy consumed since power-on (may wrap at the hardware width).",
        dcgm="DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION (mJ)",
    ),
    CounterDef("clock_mhz", "MHz", "gauge", "Current compute clock.", dcgm="DCGM_FI_DEV_SM_CLOCK"),
    CounterDef(
        "clock_max_mhz", "MHz", "gauge", "Maximum compute clock.", dcgm="DCGM_FI_DEV_MAX_SM_CLOCK"
    ),
    CounterDef(
        "throttle_reasons",
        "1",
        "state",
        "Why the clock is below its maximum: none, idle, thermal, power, or thermal,power.",
        values=THROTTLE_REASONS,
        dcgm="DCGM_FI_DEV_CLOCK_THROTTLE_REASONS (bitmask)",
    ),
    # -- memory -----------------------------------------------------------------------------
    CounterDef(
        "memory_used_bytes", "B", "gauge", "Device memory in use.", dcgm="DCGM_FI_DEV_FB_USED (MiB)"
    ),
    CounterDef(
        "memory_free_bytes", "B", "gauge", "Device memory free.", dcgm="DCGM_FI_DEV_FB_FREE (MiB)"
    ),
    CounterDef(
        "memory_total_bytes",
        "B",
        "gauge",
        "Device memory in total.",
        dcgm="DCGM_FI_DEV_FB_TOTAL (MiB)",
    ),
    CounterDef("memory_utilization", "1", "gauge", "Used over total device memory, 0..1."),
    # -- errors -----------------------------------------------------------------------------
    CounterDef(
        "ecc_corrected_total",
        "count",
        "counter",
        "Corrected (single-bit) memory ECC errors since power-on.",
        dcgm="DCGM_FI_DEV_ECC_SBE_VOL_TOTAL",
    ),
    CounterDef(
        "ecc_uncorrected_total",
        "count",
        "counter",
        "Uncorrected (double-bit) memory ECC errors since power-on.",
        dcgm="DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
    ),
    CounterDef(
        "ecc_corrected_per_s",
        "count/s",
        "gauge",
        "Corrected ECC errors per second over the last refresh interval.",
    ),
    CounterDef(
        "pcie_errors_total",
        "count",
        "counter",
        "Correctable PCIe errors (replays, bad TLPs/DLLPs) since power-on.",
        dcgm="DCGM_FI_DEV_PCIE_REPLAY_COUNTER",
    ),
    CounterDef(
        "pcie_errors_per_s",
        "count/s",
        "gauge",
        "PCIe errors per second over the last refresh interval.",
    ),
    CounterDef(
        "pcie_link_gen",
        "1",
        "gauge",
        "PCIe link generation as trained now.",
        dcgm="DCGM_FI_DEV_PCIE_LINK_GEN",
    ),
    CounterDef(
        "pcie_link_width",
        "lanes",
        "gauge",
        "PCIe link width as trained now.",
        dcgm="DCGM_FI_DEV_PCIE_LINK_WIDTH",
    ),
    CounterDef(
        "pcie_link_status",
        "1",
        "state",
        "ok, or degraded when the link trained below its maximum width.",
        values=LINK_STATUSES,
    ),
    # -- software and driver -------------------------------------------------------------
    CounterDef(
        "device_model", "1", "info", "Model name as the driver reports it.", dcgm="DCGM_FI_DEV_NAME"
    ),
    CounterDef(
        "firmware_version",
        "1",
        "info",
        "Firmware (or VBIOS) version.",
        dcgm="DCGM_FI_DEV_VBIOS_VERSION",
    ),
    CounterDef("driver_version", "1", "info", "Driver version.", dcgm="DCGM_FI_DRIVER_VERSION"),
    # -- filled by the monitor runtime, never by specs ----------------------------------------
    CounterDef(
        "driver_status",
        "1",
        "state",
        "ok; hung when the driver does not answer in time; rebooting; error for any other failure.",
        values=DRIVER_STATUSES,
    ),
    CounterDef(
        "driver_error",
        "1",
        "info",
        "What went wrong on the last refresh, or null when it succeeded.",
    ),
    CounterDef("sample_ts", "s", "gauge", "Epoch seconds of the refresh this snapshot comes from."),
    CounterDef("probe_duration_s", "s", "gauge", "Time the last probe of the driver took."),
]

CATALOGUE: Mapping[str, CounterDef] = {c.name: c for c in _COUNTERS}

# Set by the runtime on every refresh; a spec may not assign them.
RUNTIME_COUNTERS = ("driver_status", "driver_error", "sample_ts", "probe_duration_s")

# Keys every snapshot carries (None when unknown).
ALWAYS_PRESENT = (
    "device_utilization",
    "temperature_c",
    "power_w",
    "memory_used_bytes",
    "memory_total_bytes",
    "driver_status",
    "sample_ts",
)
