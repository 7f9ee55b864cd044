"""Fleet configuration and layout: the same config always gives the same fleet, hosts are found
by name, and a config that cannot make a fleet is refused."""

import pytest

from emulator import FleetConfig, fleet_layout
from emulator.config import find_host
from emulator.devices.zoo import device_type


def test_layout_is_deterministic_and_mixes_types():
    cfg = FleetConfig(seed=42, hosts=4, devices_per_host=8)
    a, b = fleet_layout(cfg), fleet_layout(cfg)
    assert a == b
    assert [h.name for h in a] == ["host-00", "host-01", "host-02", "host-03"]
    for h in a:
        assert {d.type for d in h.devices} == {"video", "inference", "gpu"}
        assert all(d.host == h.name for d in h.devices)
    serials = [d.serial for h in a for d in h.devices]
    assert len(set(serials)) == len(serials)
    assert fleet_layout(FleetConfig(seed=43, hosts=4, devices_per_host=8)) != a


def test_a_host_is_found_by_its_name_as_the_layout_has_it():
    cfg = FleetConfig(seed=1, hosts=120, devices_per_host=2)
    assert cfg.host_name(7) == "host-007"  # as wide as the largest index
    assert find_host(cfg, "host-007") == fleet_layout(cfg)[7]
    for name in ("host-7", "host-120", "host-0x7", "node-007"):
        with pytest.raises(KeyError, match=r"hosts host-000\.\.host-119"):
            find_host(cfg, name)


def test_a_device_is_found_on_its_host_and_its_firmware_follows_its_software():
    host = fleet_layout(FleetConfig(seed=3, hosts=1, devices_per_host=6, types=("gpu",)))[0]
    assert {d.type for d in host.devices} == {"gpu"} and [d.index for d in host.devices] == list(
        range(6)
    )
    device = host.devices[4]
    assert host.device(device.serial) is device
    assert device.serial.startswith("EGX-0000-04-")  # type prefix, host, position, a seeded token
    assert device.firmware_version == device_type("gpu").firmware_for(device.sw_version)
    assert device_type("gpu").firmware_for("9.9") == "9.9.0"  # a version the type does not list
    with pytest.raises(KeyError, match="no device 'X' on host-00"):
        host.device("X")


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"hosts": -1}, "at least one device"),
        ({"devices_per_host": 0}, "at least one device"),
        ({"types": ()}, "at least one device type"),
        ({"types": ("video", "tpu")}, "unknown device type 'tpu'; known types: "),
    ],
)
def test_a_config_that_makes_no_fleet_is_refused(fields, message):
    with pytest.raises((ValueError, KeyError), match=message):
        FleetConfig(**fields)
