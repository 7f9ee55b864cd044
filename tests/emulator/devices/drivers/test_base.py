"""The base of the emulated drivers: the narrow context a driver sees of its host, and what a
hung device does to a caller."""

import time

import pytest

from emulator.devices.drivers import DRIVERS, register_driver
from emulator.devices.drivers.base import DeviceBinding, Driver, DriverContext


def test_a_driver_resets_devices_only_through_its_hosts_reset():
    asked = []
    ctx = DriverContext(states={}, devices={}, hang_block_s=0.0, reset=asked.append)
    ctx.reset_device("EVT-1")
    assert asked == ["EVT-1"]
    with pytest.raises(RuntimeError, match="cannot reset devices"):
        DriverContext(states={}, devices={}, hang_block_s=0.0).reset_device("EVT-1")


def test_a_call_to_a_hung_device_blocks_for_the_drivers_timeout():
    driver = Driver(DriverContext(states={}, devices={}, hang_block_s=0.05), ["EVT-1"])
    start = time.monotonic()
    driver.block_while_hung()
    assert time.monotonic() - start >= 0.05


def test_a_driver_that_shows_nothing_says_so():
    driver = Driver(DriverContext(states={}, devices={}, hang_block_s=0.0), [])
    with pytest.raises(NotImplementedError):
        driver.bindings()
    with pytest.raises(NotImplementedError):
        driver.describe("EVT-1")
    with pytest.raises(AttributeError):
        DeviceBinding(index=0).index = 1  # a binding is fixed once given out


def test_a_driver_interface_from_outside_the_zoo_is_registered_by_its_name():
    class PcieMmio(Driver):
        name = "pcie_mmio_test"

    try:
        assert register_driver(PcieMmio) is PcieMmio
        assert DRIVERS["pcie_mmio_test"] is PcieMmio
    finally:
        DRIVERS.pop("pcie_mmio_test", None)
