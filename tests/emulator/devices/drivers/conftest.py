"""A small emulated host with one device of each shipped type, a minute into its run, for the
tests of the driver interfaces. Calls to a hung device block only briefly here."""

import pytest

from emulator import EmulatedHost, FleetConfig

T0 = 1_700_000_000.0


@pytest.fixture
def host():
    emulated = EmulatedHost(
        FleetConfig(seed=2, hosts=1, devices_per_host=3, hang_block_s=0.01), "host-00"
    )
    emulated.sync(T0)
    emulated.advance(T0 + 60)
    return emulated


@pytest.fixture
def serial_of(host):
    """The serial of the host's device of a type."""
    return lambda dtype: next(d.serial for d in host.spec.devices if d.type == dtype)
