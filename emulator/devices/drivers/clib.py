"""The inference accelerator's driver: a C-library style API ("libemunx").

As with a C library, every function returns a status code (``NX_OK`` is 0) and writes its
results through out-parameters: any object with a writable ``value`` attribute (a
``ctypes.c_uint64`` works, and so does `asimov`'s ``Out``). Handles come from
``nx_open(index, out handle)``. Counters are the hardware's widths: core cycle counters are
48-bit and wrap.
"""

from __future__ import annotations

from typing import Any

from emulator.devices.drivers.base import DeviceBinding, Driver
from emulator.devices.physics import DevicePhysics
from emulator.devices.zoo import device_type

NX_OK = 0
NX_ERR_INVALID_ARG = 1
NX_ERR_NO_DEVICE = 2
NX_ERR_TIMEOUT = 3
NX_ERR_RESETTING = 4
NX_ERR_IO = 5
NX_ERRORS = {
    NX_OK: "success",
    NX_ERR_INVALID_ARG: "invalid argument",
    NX_ERR_NO_DEVICE: "no such device",
    NX_ERR_TIMEOUT: "timed out waiting for firmware",
    NX_ERR_RESETTING: "device is resetting",
    NX_ERR_IO: "i/o error",
}
NX_SENSOR_DIE = 0
NX_SENSOR_BOARD = 1
NX_THROTTLE_THERMAL = 0x1
NX_THROTTLE_POWER = 0x2
_HANDLE_BASE = 0x4E580000


class NxLibrary:
    """The library as a process sees it on one host: functions over that host's NX devices."""

    def __init__(self, driver: ClibDriver) -> None:
        self._driver = driver
        self._states = driver.ctx.states
        self._serials = driver.serials
        self._type = (
            device_type(driver.ctx.device(driver.serials[0]).type) if driver.serials else None
        )
        for name, value in globals().items():
            if name.startswith("NX_"):
                setattr(self, name, value)

    # -- plumbing -----------------------------------------------------------------------
    def _state(self, handle: Any) -> DevicePhysics | int:
        """The device state behind a handle, or the status code the call must return."""
        i = handle - _HANDLE_BASE if isinstance(handle, int) else -1
        if not 0 <= i < len(self._serials):
            return NX_ERR_INVALID_ARG
        s = self._states[self._serials[i]]
        if s.faults and "hang" in s.faults:
            self._driver.block_while_hung()
            return NX_ERR_TIMEOUT
        if s.rebooting_until is not None and s.rebooting:
            return NX_ERR_RESETTING
        return s

    # -- the API ------------------------------------------------------------------------
    def nx_get_device_count(self, count: Any) -> int:
        count.value = len(self._serials)
        return NX_OK

    def nx_open(self, index: int, handle: Any) -> int:
        if not 0 <= index < len(self._serials):
            return NX_ERR_NO_DEVICE
        s = self._state(_HANDLE_BASE + index)
        if isinstance(s, int):
            return s
        handle.value = _HANDLE_BASE + index
        return NX_OK

    def nx_reset(self, handle: Any) -> int:
        """Resets the device (a function-level reset): it answers NX_ERR_RESETTING until it is
        back. Works on a hung device too; that is what it is for."""
        i = handle - _HANDLE_BASE if isinstance(handle, int) else -1
        if not 0 <= i < len(self._serials):
            return NX_ERR_INVALID_ARG
        self._driver.ctx.reset_device(self._serials[i])
        return NX_OK

    def nx_close(self, handle: Any) -> int:
        return NX_OK

    def nx_strerror(self, status: int) -> str:
        return NX_ERRORS.get(status, "unknown error")

    def nx_get_driver_version(self, version: Any) -> int:
        version.value = self._type.driver_version if self._type else ""
        return NX_OK

    def nx_get_firmware_version(self, handle: Any, major: Any, minor: Any, patch: Any) -> int:
        s = self._state(handle)
        if isinstance(s, int):
            return s
        spec = self._driver.ctx.device(s.serial)
        major.value, minor.value, patch.value = (int(p) for p in spec.firmware_version.split("."))
        return NX_OK

    def nx_get_model(self, handle: Any, model: Any) -> int:
        s = self._state(handle)
        if isinstance(s, int):
            return s
        model.value = device_type(s.type).model
        return NX_OK

    def nx_get_core_count(self, handle: Any, count: Any) -> int:
        s = self._state(handle)
        if isinstance(s, int):
            return s
        count.value = len(s.core_activity)
        return NX_OK

    def nx_get_core_cycles(self, handle: Any, core: int, active: Any, total: Any) -> int:
        """Active and elapsed cycles of one core since power-on, 48-bit, wrapping."""
        s = self._state(handle)
        if isinstance(s, int):
            return s
        if not 0 <= core < len(s.core_activity):
            return NX_ERR_INVALID_ARG
        mask = (1 << self._type.counter_bits) - 1
        active.value = s.core_active_cycles[core] & mask
        total.value = s.core_total_cycles[core] & mask
        return NX_OK

    def nx_get_temperature(self, handle: Any, sensor: int, centi_celsius: Any) -> int:
        s = self._state(handle)
        if isinstance(s, int):
            return s
        if sensor not in (NX_SENSOR_DIE, NX_SENSOR_BOARD):
            return NX_ERR_INVALID_ARG
        t = (
            s.temperature_c
            if sensor == NX_SENSOR_DIE
            else (s.temperature_c + self._type.ambient_c) / 2
        )
        centi_celsius.value = round(t * 100)
        return NX_OK

    def nx_get_power(self, handle: Any, microwatts: Any) -> int:
        s = self._state(handle)
        if isinstance(s, int):
            return s
        microwatts.value = round(s.power_w * 1e6)
        return NX_OK

    def nx_get_energy(self, handle: Any, millijoules: Any) -> int:
        s = self._state(handle)
        if isinstance(s, int):
            return s
        millijoules.value = s.energy_mj
        return NX_OK

    def nx_get_clock(self, handle: Any, mhz: Any, max_mhz: Any) -> int:
        s = self._state(handle)
        if isinstance(s, int):
            return s
        mhz.value = round(s.clock_mhz)
        max_mhz.value = round(self._type.max_clock_mhz)
        return NX_OK

    def nx_get_throttle_reasons(self, handle: Any, mask: Any) -> int:
        s = self._state(handle)
        if isinstance(s, int):
            return s
        mask.value = (NX_THROTTLE_THERMAL if s.throttle_thermal else 0) | (
            NX_THROTTLE_POWER if s.throttle_power else 0
        )
        return NX_OK

    def nx_get_memory(self, handle: Any, used_kib: Any, total_kib: Any) -> int:
        s = self._state(handle)
        if isinstance(s, int):
            return s
        used_kib.value = s.memory_used_bytes // 1024
        total_kib.value = self._type.memory_bytes // 1024
        return NX_OK

    def nx_get_dma_bytes(self, handle: Any, to_device: Any, from_device: Any) -> int:
        s = self._state(handle)
        if isinstance(s, int):
            return s
        to_device.value = s.dma_to_device_bytes
        from_device.value = s.dma_from_device_bytes
        return NX_OK

    def nx_get_ecc_counts(self, handle: Any, corrected: Any, uncorrected: Any) -> int:
        s = self._state(handle)
        if isinstance(s, int):
            return s
        corrected.value = s.ecc_corrected
        uncorrected.value = s.ecc_uncorrected
        return NX_OK

    def nx_get_pcie_link(self, handle: Any, gen: Any, width: Any) -> int:
        s = self._state(handle)
        if isinstance(s, int):
            return s
        gen.value, width.value = s.pcie_link(self._type)
        return NX_OK

    def nx_get_pcie_error_count(self, handle: Any, count: Any) -> int:
        s = self._state(handle)
        if isinstance(s, int):
            return s
        count.value = s.pcie_errors
        return NX_OK

    def nx_get_inference_count(self, handle: Any, count: Any) -> int:
        s = self._state(handle)
        if isinstance(s, int):
            return s
        count.value = s.work_items
        return NX_OK


class _Out:
    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = None


class ClibDriver(Driver):
    name = "clib"

    def bindings(self) -> dict[str, DeviceBinding]:
        lib = NxLibrary(self)
        return {serial: DeviceBinding(index=i, lib=lib) for i, serial in enumerate(self.serials)}

    def describe(self, serial: str) -> dict[str, Any]:
        binding = self.bindings()[serial]
        lib = binding.lib
        h = _Out()
        status = lib.nx_open(binding.index, h)
        out: dict[str, Any] = {"nx_open": f"status={status} handle={h.value!r}"}
        if status != NX_OK:
            return out
        calls = [
            ("nx_get_model", (), 1),
            ("nx_get_firmware_version", (), 3),
            ("nx_get_core_count", (), 1),
            ("nx_get_temperature", (NX_SENSOR_DIE,), 1),
            ("nx_get_power", (), 1),
            ("nx_get_energy", (), 1),
            ("nx_get_clock", (), 2),
            ("nx_get_throttle_reasons", (), 1),
            ("nx_get_memory", (), 2),
            ("nx_get_dma_bytes", (), 2),
            ("nx_get_ecc_counts", (), 2),
            ("nx_get_pcie_link", (), 2),
            ("nx_get_pcie_error_count", (), 1),
            ("nx_get_inference_count", (), 1),
        ]
        calls += [
            ("nx_get_core_cycles", (c,), 2)
            for c in range(device_type(self.ctx.device(serial).type).cores)
        ]
        for name, args, n_out in calls:
            outs = [_Out() for _ in range(n_out)]
            status = getattr(lib, name)(h.value, *args, *outs)
            label = f"{name}({', '.join(map(str, args))})" if args else name
            out[label] = f"status={status} " + " ".join(repr(o.value) for o in outs)
        return out
