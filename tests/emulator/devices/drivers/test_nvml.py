"""The GPU-like accelerator's NVML-shaped API: names and codes as nvidia-ml-py has them, errors
raised with their NVML code, and throttle reasons as bits."""

import pytest

from emulator.devices.drivers import nvml
from emulator.devices.zoo import device_type


@pytest.fixture
def binding(host, serial_of):
    return host.binding(serial_of("gpu"))


@pytest.fixture
def nv(binding):
    binding.lib.nvmlInit()
    yield binding.lib
    binding.lib.nvmlShutdown()


def test_nvml_shape_matches_nvidia_ml_py(binding):
    pynvml = pytest.importorskip("pynvml")
    nv = binding.lib
    with pytest.raises(nvml.NVMLError) as err:
        nv.nvmlDeviceGetCount()
    assert err.value.value == pynvml.NVML_ERROR_UNINITIALIZED
    nv.nvmlInit()
    handle = nv.nvmlDeviceGetHandleByIndex(binding.index)
    mem = nv.nvmlDeviceGetMemoryInfo(handle)
    assert mem.used + mem.free == mem.total
    assert 0 <= nv.nvmlDeviceGetUtilizationRates(handle).gpu <= 100
    for name in dir(nv):
        if (
            name.startswith("nvml")
            and callable(getattr(nv, name))
            and not name.startswith("nvmlClocks")
        ):
            assert hasattr(pynvml, name), name
        if name.startswith("NVML_"):
            assert getattr(pynvml, name) == getattr(nv, name), name


def test_init_and_shutdown_nest_as_nvml_counts_them(binding):
    nv = binding.lib
    nv.nvmlInit()
    nv.nvmlInit()
    nv.nvmlShutdown()
    assert nv.nvmlDeviceGetCount() == 1
    nv.nvmlShutdown()
    with pytest.raises(nvml.NVMLError) as err:
        nv.nvmlDeviceGetHandleByIndex(binding.index)
    assert err.value.value == nvml.NVML_ERROR_UNINITIALIZED and str(err.value) == "Uninitialized"


def test_bad_arguments_raise_invalid_argument(nv, binding):
    handle = nv.nvmlDeviceGetHandleByIndex(binding.index)
    calls = [
        lambda: nv.nvmlDeviceGetHandleByIndex(5),
        lambda: nv.nvmlDeviceGetTemperature(handle, 1),
        lambda: nv.nvmlDeviceGetClockInfo(handle, 9),
        lambda: nv.nvmlDeviceGetTotalEccErrors(handle, 2, nvml.NVML_VOLATILE_ECC),
        lambda: nv.nvmlDeviceGetTotalEccErrors(handle, nvml.NVML_MEMORY_ERROR_TYPE_CORRECTED, 5),
        lambda: nv.nvmlDeviceGetPowerUsage(nvml.Handle(3)),
    ]
    for call in calls:
        with pytest.raises(nvml.NVMLError) as err:
            call()
        assert err.value.value == nvml.NVML_ERROR_INVALID_ARGUMENT
    assert str(nvml.NVMLError(77)) == "NVML error 77"


def test_throttle_reasons_are_bits_of_the_device_state(host, serial_of, nv, binding):
    handle = nv.nvmlDeviceGetHandleByIndex(binding.index)
    state = host.state(serial_of("gpu"))
    state.throttle_thermal, state.throttle_power, state.load = False, False, 0.0
    assert (
        nv.nvmlDeviceGetCurrentClocksThrottleReasons(handle) == nvml.nvmlClocksThrottleReasonGpuIdle
    )
    state.throttle_power = True
    assert (
        nv.nvmlDeviceGetCurrentClocksThrottleReasons(handle)
        == nvml.nvmlClocksThrottleReasonSwPowerCap
    )
    state.throttle_power, state.throttle_thermal = False, True
    state.temperature_c = (
        device_type("gpu").throttle_c + 10
    )  # past the limit by more than 5 °C: hardware too
    assert nv.nvmlDeviceGetCurrentClocksThrottleReasons(handle) == (
        nvml.nvmlClocksThrottleReasonSwThermalSlowdown
        | nvml.nvmlClocksThrottleReasonHwThermalSlowdown
    )


def test_a_reset_gpu_is_lost_until_it_is_back(host, serial_of, nv, binding):
    handle = nv.nvmlDeviceGetHandleByIndex(binding.index)
    nv.emuDeviceReset(handle)
    with pytest.raises(nvml.NVMLError) as err:
        nv.nvmlDeviceGetPowerUsage(handle)
    assert err.value.value == nvml.NVML_ERROR_GPU_IS_LOST and str(err.value) == "GPU is lost"
    assert host.describe(serial_of("gpu")) == {
        "nvmlDeviceGetHandleByIndex": "NVMLError: GPU is lost"
    }
    host.advance(host.now + host.cfg.reboot_s + 1)
    assert nv.nvmlDeviceGetPowerUsage(handle) > 0
