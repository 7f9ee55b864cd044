"""The GPU-like accelerator's driver: an API shaped like NVML as nvidia-ml-py presents it.

Function names, argument orders, units and error codes follow NVML: temperatures in C,
power in mW, energy in mJ, clocks in MHz, memory in bytes, utilization in percent, errors
raised as `NVMLError` carrying the NVML return code in ``.value``. A spec written against
this object works unchanged against the ``pynvml`` module on a machine with NVIDIA GPUs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from emulator.devices.drivers.base import DeviceBinding, Driver
from emulator.devices.physics import DevicePhysics
from emulator.devices.zoo import device_type

# NVML return codes and enums (values as in nvml.h)
NVML_SUCCESS = 0
NVML_ERROR_UNINITIALIZED = 1
NVML_ERROR_INVALID_ARGUMENT = 2
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_NOT_FOUND = 6
NVML_ERROR_TIMEOUT = 10
NVML_ERROR_GPU_IS_LOST = 15
NVML_ERROR_UNKNOWN = 999
NVML_TEMPERATURE_GPU = 0
NVML_CLOCK_GRAPHICS = 0
NVML_CLOCK_SM = 1
NVML_CLOCK_MEM = 2
NVML_CLOCK_VIDEO = 3
NVML_MEMORY_ERROR_TYPE_CORRECTED = 0
NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1
NVML_VOLATILE_ECC = 0
NVML_AGGREGATE_ECC = 1
nvmlClocksThrottleReasonGpuIdle = 0x1
nvmlClocksThrottleReasonSwPowerCap = 0x4
nvmlClocksThrottleReasonSwThermalSlowdown = 0x20
nvmlClocksThrottleReasonHwThermalSlowdown = 0x40

_MESSAGES = {
    NVML_ERROR_UNINITIALIZED: "Uninitialized",
    NVML_ERROR_INVALID_ARGUMENT: "Invalid Argument",
    NVML_ERROR_NOT_SUPPORTED: "Not Supported",
    NVML_ERROR_NOT_FOUND: "Not Found",
    NVML_ERROR_TIMEOUT: "Timeout",
    NVML_ERROR_GPU_IS_LOST: "GPU is lost",
    NVML_ERROR_UNKNOWN: "Unknown Error",
}


class NVMLError(Exception):
    """Raised by every failing call; ``value`` is the NVML return code."""

    def __init__(self, value: int) -> None:
        super().__init__(value)
        self.value = value

    def __str__(self) -> str:
        return _MESSAGES.get(self.value, f"NVML error {self.value}")


@dataclass(frozen=True)
class Utilization:
    gpu: int
    memory: int


@dataclass(frozen=True)
class Memory:
    total: int
    free: int
    used: int


@dataclass(frozen=True)
class Handle:
    index: int


class EmulatedNVML:
    """The NVML API over the GPU-like devices of one host."""

    NVMLError = NVMLError

    def __init__(self, driver: NvmlDriver) -> None:
        self._driver = driver
        self._states = driver.ctx.states
        self._serials = driver.serials
        self._handles = [Handle(i) for i in range(len(driver.serials))]
        self._initialised = 0
        for name, value in globals().items():
            if name.startswith(("NVML_", "nvmlClocksThrottleReason")):
                setattr(self, name, value)

    def _state(self, handle: Handle) -> DevicePhysics:
        if not self._initialised:
            raise NVMLError(NVML_ERROR_UNINITIALIZED)
        if not isinstance(handle, Handle) or not 0 <= handle.index < len(self._serials):
            raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
        s = self._states[self._serials[handle.index]]
        if s.faults and "hang" in s.faults:
            self._driver.block_while_hung()
            raise NVMLError(NVML_ERROR_TIMEOUT)
        if s.rebooting_until is not None and s.rebooting:
            raise NVMLError(NVML_ERROR_GPU_IS_LOST)
        return s

    def _type(self, s: DevicePhysics):
        return device_type(s.type)

    # -- init and discovery -------------------------------------------------------------
    def nvmlInit(self) -> None:
        self._initialised += 1

    def nvmlShutdown(self) -> None:
        self._initialised = max(0, self._initialised - 1)

    def nvmlDeviceGetCount(self) -> int:
        if not self._initialised:
            raise NVMLError(NVML_ERROR_UNINITIALIZED)
        return len(self._serials)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> Handle:
        if not self._initialised:
            raise NVMLError(NVML_ERROR_UNINITIALIZED)
        if not 0 <= index < len(self._handles):
            raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
        self._state(self._handles[index])  # a lost or hung GPU fails here too
        return self._handles[index]

    def emuDeviceReset(self, handle: Handle) -> None:
        """The emulated G-80's reset call (real NVML has none: a GPU reset is
        `nvidia-smi --gpu-reset`). Works on a hung GPU; it is lost until it is back."""
        if not self._initialised:
            raise NVMLError(NVML_ERROR_UNINITIALIZED)
        if not isinstance(handle, Handle) or not 0 <= handle.index < len(self._serials):
            raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
        self._driver.ctx.reset_device(self._serials[handle.index])

    def nvmlSystemGetDriverVersion(self) -> str:
        if not self._serials:
            raise NVMLError(NVML_ERROR_NOT_FOUND)
        return self._type(self._states[self._serials[0]]).driver_version

    # -- identity -----------------------------------------------------------------------
    def nvmlDeviceGetName(self, handle: Handle) -> str:
        return self._type(self._state(handle)).model

    def nvmlDeviceGetSerial(self, handle: Handle) -> str:
        return self._state(handle).serial

    def nvmlDeviceGetVbiosVersion(self, handle: Handle) -> str:
        s = self._state(handle)
        return self._driver.ctx.device(s.serial).firmware_version

    # -- performance and health -----------------------------------------------------------
    def nvmlDeviceGetUtilizationRates(self, handle: Handle) -> Utilization:
        s = self._state(handle)
        busy = max(s.core_activity) if s.core_activity else 0.0
        return Utilization(gpu=round(busy * 100), memory=round(s.load * 60))

    def nvmlDeviceGetMemoryInfo(self, handle: Handle) -> Memory:
        s = self._state(handle)
        total = self._type(s).memory_bytes
        return Memory(total=total, free=total - s.memory_used_bytes, used=s.memory_used_bytes)

    def nvmlDeviceGetTemperature(self, handle: Handle, sensor: int) -> int:
        s = self._state(handle)
        if sensor != NVML_TEMPERATURE_GPU:
            raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
        return round(s.temperature_c)

    def nvmlDeviceGetPowerUsage(self, handle: Handle) -> int:
        return round(self._state(handle).power_w * 1000)

    def nvmlDeviceGetEnforcedPowerLimit(self, handle: Handle) -> int:
        return round(self._type(self._state(handle)).tdp_w * 1000)

    def nvmlDeviceGetTotalEnergyConsumption(self, handle: Handle) -> int:
        return self._state(handle).energy_mj

    def nvmlDeviceGetClockInfo(self, handle: Handle, clock_type: int) -> int:
        s = self._state(handle)
        if clock_type == NVML_CLOCK_MEM:
            return 1593
        if clock_type not in (NVML_CLOCK_GRAPHICS, NVML_CLOCK_SM, NVML_CLOCK_VIDEO):
            raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
        return round(s.clock_mhz)

    def nvmlDeviceGetMaxClockInfo(self, handle: Handle, clock_type: int) -> int:
        d = self._type(self._state(handle))
        return 1593 if clock_type == NVML_CLOCK_MEM else round(d.max_clock_mhz)

    def nvmlDeviceGetTotalEccErrors(
        self, handle: Handle, error_type: int, counter_type: int
    ) -> int:
        s = self._state(handle)
        if counter_type not in (NVML_VOLATILE_ECC, NVML_AGGREGATE_ECC):
            raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
        if error_type == NVML_MEMORY_ERROR_TYPE_CORRECTED:
            return s.ecc_corrected
        if error_type == NVML_MEMORY_ERROR_TYPE_UNCORRECTED:
            return s.ecc_uncorrected
        raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, handle: Handle) -> int:
        s = self._state(handle)
        mask = 0
        if s.throttle_thermal:
            mask |= nvmlClocksThrottleReasonSwThermalSlowdown
            if s.temperature_c > self._type(s).throttle_c + 5:
                mask |= nvmlClocksThrottleReasonHwThermalSlowdown
        if s.throttle_power:
            mask |= nvmlClocksThrottleReasonSwPowerCap
        if s.load < 0.01 and not mask:
            mask |= nvmlClocksThrottleReasonGpuIdle
        return mask

    def nvmlDeviceGetCurrPcieLinkGeneration(self, handle: Handle) -> int:
        s = self._state(handle)
        return s.pcie_link(self._type(s))[0]

    def nvmlDeviceGetCurrPcieLinkWidth(self, handle: Handle) -> int:
        s = self._state(handle)
        return s.pcie_link(self._type(s))[1]

    def nvmlDeviceGetMaxPcieLinkWidth(self, handle: Handle) -> int:
        return self._type(self._state(handle)).pcie_width

    def nvmlDeviceGetPcieReplayCounter(self, handle: Handle) -> int:
        return self._state(handle).pcie_errors


class NvmlDriver(Driver):
    name = "nvml"

    def bindings(self) -> dict[str, DeviceBinding]:
        lib = EmulatedNVML(self)
        return {serial: DeviceBinding(index=i, lib=lib) for i, serial in enumerate(self.serials)}

    def describe(self, serial: str) -> dict[str, Any]:
        binding = self.bindings()[serial]
        nv = binding.lib
        nv.nvmlInit()
        out: dict[str, Any] = {}
        try:
            h = nv.nvmlDeviceGetHandleByIndex(binding.index)
        except NVMLError as exc:
            return {"nvmlDeviceGetHandleByIndex": f"NVMLError: {exc}"}
        calls = [
            ("nvmlDeviceGetName", ()),
            ("nvmlDeviceGetVbiosVersion", ()),
            ("nvmlDeviceGetUtilizationRates", ()),
            ("nvmlDeviceGetMemoryInfo", ()),
            ("nvmlDeviceGetTemperature", (NVML_TEMPERATURE_GPU,)),
            ("nvmlDeviceGetPowerUsage", ()),
            ("nvmlDeviceGetTotalEnergyConsumption", ()),
            ("nvmlDeviceGetClockInfo", (NVML_CLOCK_SM,)),
            ("nvmlDeviceGetTotalEccErrors", (NVML_MEMORY_ERROR_TYPE_CORRECTED, NVML_VOLATILE_ECC)),
            (
                "nvmlDeviceGetTotalEccErrors",
                (NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_VOLATILE_ECC),
            ),
            ("nvmlDeviceGetCurrentClocksThrottleReasons", ()),
            ("nvmlDeviceGetCurrPcieLinkGeneration", ()),
            ("nvmlDeviceGetCurrPcieLinkWidth", ()),
            ("nvmlDeviceGetPcieReplayCounter", ()),
        ]
        for name, args in calls:
            label = f"{name}({', '.join(map(str, args))})" if args else name
            try:
                out[label] = repr(getattr(nv, name)(h, *args))
            except NVMLError as exc:
                out[label] = f"NVMLError: {exc}"
        return out
