"""What each catalogue counter is called elsewhere: its UCUM unit, its OpenTelemetry metric
(the ``hw.*`` hardware conventions, status "development") with attributes, the NVIDIA DCGM
field (kept on the counter itself, `CounterDef.dcgm`), the amd-smi field (``amd-smi metric
--json`` paths) and the DMTF Redfish property (resource.property) where one exists.

One row per counter of `fleet.asicmon.catalogue.CATALOGUE`: the published interface
(docs/spec/, written by `fleet.asimov.interface.document`) is generated from this table and the
catalogue, and a counter added without its row fails there (`missing_mappings`). An empty
string says "no equivalent there"; it is a statement, not an omission.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from fleet.asicmon.catalogue import CATALOGUE

__all__ = ["MAPPINGS", "UCUM", "Names", "missing_mappings", "ucum"]

# Catalogue units as UCUM writes them (unitsofmeasure.org); a unit not listed is already UCUM.
UCUM = {"C": "Cel", "B": "By", "B/s": "By/s", "count": "{count}", "count/s": "{count}/s", "lanes": "{lane}"}


def ucum(unit: str) -> str:
    return UCUM.get(unit, unit)


@dataclass(frozen=True)
class Names:
    """A counter's names in other monitoring interfaces."""

    otel: str = ""  # OpenTelemetry metric name
    otel_attributes: Mapping[str, str] = field(default_factory=dict)
    amdsmi: str = ""  # amd-smi metric field (ROCm SMI)
    redfish: str = ""  # Redfish resource.property
    note: str = ""  # a unit or shape difference a reader must know


_GPU = {"hw.type": "gpu"}

MAPPINGS: Mapping[str, Names] = {
    "device_utilization": Names("hw.gpu.utilization", {"hw.gpu.task": "general"}, "usage.gfx_activity",
                                "ProcessorMetrics.BandwidthPercent", "DCGM and amd-smi report percent"),
    "core_utilization": Names("hw.gpu.utilization", {"hw.gpu.task": "general", "hw.id": "<device>/core<N>"},
                              "usage.gfx_activity (per XCP)", "ProcessorMetrics.CoreMetrics[].CorePercent"),
    "core_count": Names("", {}, "", "Processor.TotalCores"),
    "work_items_total": Names(),
    "work_items_per_s": Names(),
    "dma_to_device_bytes_total": Names("hw.gpu.io", {"network.io.direction": "receive"}, "pcie.bandwidth (accumulated)", ""),
    "dma_from_device_bytes_total": Names("hw.gpu.io", {"network.io.direction": "transmit"}, "pcie.bandwidth (accumulated)", ""),
    "dma_to_device_bytes_per_s": Names("", {}, "pcie.bandwidth", "",
                                       "hw.gpu.io is a counter: a backend derives this rate"),
    "dma_from_device_bytes_per_s": Names("", {}, "pcie.bandwidth", "",
                                         "hw.gpu.io is a counter: a backend derives this rate"),
    "temperature_c": Names("hw.temperature", {"hw.type": "temperature", "hw.parent": "<gpu hw.id>"},
                           "temperature.hotspot", "ProcessorMetrics.TemperatureCelsius"),
    "temperature_limit_c": Names("hw.temperature.limit", {"hw.type": "temperature", "limit_type": "throttle"},
                                 "limit.slowdown_edge_temperature (amd-smi static)", "Processor.Thermal (ThresholdUpperCritical)"),
    "power_w": Names("hw.power", _GPU, "power.socket_power", "EnvironmentMetrics.PowerWatts"),
    "power_limit_w": Names("hw.power.limit", _GPU, "limit.max_power (amd-smi static)",
                           "EnvironmentMetrics.PowerLimitWatts"),
    "energy_j_total": Names("hw.energy", _GPU, "energy.total_energy_consumption", "EnvironmentMetrics.EnergyJoules",
                            "DCGM counts mJ; amd-smi counts µJ"),
    "clock_mhz": Names("", {}, "clock.gfx_0.clk", "ProcessorMetrics.OperatingSpeedMHz"),
    "clock_max_mhz": Names("", {}, "clock.gfx_0.max_clk", "Processor.MaxSpeedMHz"),
    "throttle_reasons": Names("", {}, "throttle (amd-smi metric)", "ProcessorMetrics.ThrottleReasons",
                              "DCGM and Redfish give a bitmask or list; Asicmon gives one of five words"),
    "memory_used_bytes": Names("hw.gpu.memory.usage", _GPU, "mem_usage.used_vram", "",
                               "DCGM and amd-smi count MiB"),
    "memory_free_bytes": Names("", {}, "mem_usage.free_vram", "", "limit minus usage in OpenTelemetry"),
    "memory_total_bytes": Names("hw.gpu.memory.limit", _GPU, "mem_usage.total_vram", "Memory.CapacityMiB"),
    "memory_utilization": Names("hw.gpu.memory.utilization", _GPU, "usage.umc_activity",
                                "MemoryMetrics.CapacityUtilizationPercent"),
    "ecc_corrected_total": Names("hw.errors", {"hw.type": "gpu", "error.type": "ecc_corrected"},
                                 "ecc.total_correctable_count", "MemoryMetrics.LifeTime.CorrectableECCErrorCount"),
    "ecc_uncorrected_total": Names("hw.errors", {"hw.type": "gpu", "error.type": "ecc_uncorrected"},
                                   "ecc.total_uncorrectable_count", "MemoryMetrics.LifeTime.UncorrectableECCErrorCount"),
    "ecc_corrected_per_s": Names("", {}, "", "MemoryMetrics.CurrentPeriod.CorrectableECCErrorCount",
                                 "a rate of hw.errors a backend derives"),
    "pcie_errors_total": Names("hw.errors", {"hw.type": "gpu", "error.type": "pcie_replay"}, "pcie.replay_count",
                               "ProcessorMetrics.PCIeErrors.CorrectableErrorCount"),
    "pcie_errors_per_s": Names("", {}, "", "", "a rate of hw.errors a backend derives"),
    "pcie_link_gen": Names("", {}, "pcie.speed (GT/s, not the generation)", "Processor.SystemInterface.PCIe.PCIeType"),
    "pcie_link_width": Names("", {}, "pcie.width", "Processor.SystemInterface.PCIe.LanesInUse"),
    "pcie_link_status": Names("hw.status", {"hw.type": "gpu", "hw.state": "degraded"}, "", "Processor.Status.Health"),
    "device_model": Names("", {"hw.model": "<value>"}, "asic.market_name", "Processor.Model",
                          "an attribute of every hw.gpu.* metric in OpenTelemetry"),
    "firmware_version": Names("", {"hw.firmware_version": "<value>"}, "vbios.version", "Processor.FirmwareVersion",
                              "an attribute in OpenTelemetry"),
    "driver_version": Names("", {"hw.driver_version": "<value>"}, "driver.version", "",
                            "an attribute in OpenTelemetry"),
    "driver_status": Names("hw.status", {"hw.type": "gpu"}, "", "Processor.Status.State"),
    "driver_error": Names(),
    "sample_ts": Names("", {}, "", "", "the data point's time in OpenTelemetry"),
    "probe_duration_s": Names(),
}


def missing_mappings(catalogue: Mapping | None = None, mappings: Mapping[str, Names] | None = None) -> list[str]:
    """Catalogue counters with no row in the mapping table (the document refuses them)."""
    catalogue = CATALOGUE if catalogue is None else catalogue
    mappings = MAPPINGS if mappings is None else mappings
    return [name for name in catalogue if name not in mappings]
