"""The inference accelerator's C-library style API: status codes, out-parameters, handles, and
counters at the hardware's width."""

import ctypes

import pytest

from emulator.devices.drivers import clib
from fleet.asimov.runtime import Out


@pytest.fixture
def binding(host, serial_of):
    return host.binding(serial_of("inference"))


def _open(binding) -> int:
    handle = Out()
    assert binding.lib.nx_open(binding.index, handle) == clib.NX_OK
    return handle.value


def test_clib_returns_status_codes_and_fills_out_parameters(binding):
    lib, h, t = binding.lib, Out(), Out()
    assert lib.nx_open(binding.index, h) == clib.NX_OK
    assert lib.nx_get_temperature(h.value, clib.NX_SENSOR_DIE, t) == clib.NX_OK
    assert isinstance(t.value, int) and 2000 < t.value < 15000  # centidegrees
    assert lib.nx_get_temperature(h.value, 9, t) == clib.NX_ERR_INVALID_ARG
    assert lib.nx_open(99, h) == clib.NX_ERR_NO_DEVICE
    a, tot = Out(), Out()
    assert lib.nx_get_core_cycles(lib.nx_open(binding.index, h) or h.value, 0, a, tot) == clib.NX_OK
    assert 0 <= a.value < 2**48


def test_ctypes_out_parameters_work_and_a_bad_handle_is_an_invalid_argument(binding):
    lib, handle = binding.lib, _open(binding)
    used, total = ctypes.c_uint64(), ctypes.c_uint64()
    assert lib.nx_get_memory(handle, used, total) == clib.NX_OK
    assert 0 < used.value <= total.value
    for bad in (handle + 50, "handle", None):
        assert lib.nx_get_memory(bad, used, total) == clib.NX_ERR_INVALID_ARG
    assert lib.nx_strerror(clib.NX_ERR_RESETTING) == "device is resetting"
    assert lib.nx_strerror(42) == "unknown error"


def test_cycle_counters_wrap_at_48_bits(host, serial_of, binding):
    state = host.state(serial_of("inference"))
    state.core_active_cycles[1] = 2**48 + 5
    state.core_total_cycles[1] = 2**49 + 9
    active, total = Out(), Out()
    assert binding.lib.nx_get_core_cycles(_open(binding), 1, active, total) == clib.NX_OK
    assert (active.value, total.value) == (5, 9)
    assert binding.lib.nx_get_core_cycles(
        _open(binding), len(state.core_activity), active, total
    ) == (clib.NX_ERR_INVALID_ARG)


def test_a_hung_device_times_out_until_a_reset_and_answers_resetting_while_it_is_away(
    host, serial_of, binding
):
    lib, handle, power = binding.lib, _open(binding), Out()
    host.inject_fault(serial_of("inference"), "hang")
    assert lib.nx_get_power(handle, power) == clib.NX_ERR_TIMEOUT
    assert lib.nx_reset(handle) == clib.NX_OK
    assert lib.nx_get_power(handle, power) == clib.NX_ERR_RESETTING
    assert lib.nx_open(binding.index, Out()) == clib.NX_ERR_RESETTING
    host.advance(host.now + host.cfg.reboot_s + 1)
    assert lib.nx_get_power(handle, power) == clib.NX_OK and power.value > 0


def test_the_listing_makes_every_call_of_the_api(host, serial_of):
    shown = host.describe(serial_of("inference"))
    assert shown["nx_open"].startswith(f"status={clib.NX_OK} handle=")
    assert "nx_get_core_cycles(0)" in shown and "nx_get_firmware_version" in shown
    assert all(value.startswith(f"status={clib.NX_OK} ") for value in shown.values())
