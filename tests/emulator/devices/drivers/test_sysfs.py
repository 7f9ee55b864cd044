"""The video accelerator's sysfs-style files: values formatted as a kernel driver's ``show``
callbacks format them, the one writable file, and what a hung or resetting device answers."""

import errno
import re

import pytest

from emulator.devices.drivers.sysfs import THROTTLE_POWER, THROTTLE_THERMAL, U32


@pytest.fixture
def files(host, serial_of):
    return host.binding(serial_of("video")).files


def test_sysfs_values_are_formatted_like_a_kernel_driver(files, tmp_path):
    assert re.fullmatch(r"\d+ mW\n", files.read_text("power"))
    assert re.fullmatch(r"0x[0-9a-f]{8}\n", files.read_text("throttle_status"))
    assert re.fullmatch(r"total \d+ used \d+ free \d+\n", files.read_text("mem_info"))
    assert files.read_text("pcie/current_link_speed") == "8.0 GT/s PCIe\n"
    assert "TOTAL_ERR_COR" in files.read_text("pcie/aer_dev_correctable")
    with pytest.raises(FileNotFoundError):
        files.read_text("nope")
    folder = files.materialise(tmp_path)
    assert (folder / "hwmon" / "temp1_input").read_text() == files.read_text("hwmon/temp1_input")


def test_counters_show_at_the_hardwares_width_and_flags_as_bits(host, serial_of, files):
    state = host.state(serial_of("video"))
    state.energy_mj = (U32 + 1) // 1000 + 7  # past 2**32 µJ: the file wraps
    state.ecc_corrected = U32 + 4
    state.throttle_thermal, state.throttle_power = True, True
    assert int(files.read_text("energy_uj")) == (state.energy_mj * 1000) & U32
    assert files.read_text("ecc").startswith("ce 3 ue ")
    assert int(files.read_text("throttle_status"), 16) == THROTTLE_THERMAL | THROTTLE_POWER
    state.throttle_power = False
    assert files.read_text("throttle_status") == "0x00000001\n"


def test_the_aer_counts_add_up_to_their_total(host, serial_of, files):
    host.state(serial_of("video")).pcie_errors = 17
    counts = dict(line.split() for line in files.read_text("pcie/aer_dev_correctable").splitlines())
    assert int(counts["TOTAL_ERR_COR"]) == 17
    assert sum(int(v) for k, v in counts.items() if k != "TOTAL_ERR_COR") == 17


def test_only_reset_is_writable_and_a_reset_takes_the_device_off_the_bus(host, serial_of, files):
    with pytest.raises(OSError) as denied:
        files.write_text("power", "1")
    assert denied.value.errno == errno.EACCES
    with pytest.raises(OSError) as invalid:
        files.write_text("reset", "yes")
    assert invalid.value.errno == errno.EINVAL
    files.write_text("reset", "1\n")
    with pytest.raises(OSError) as gone:
        files.read_text("power")
    assert gone.value.errno == errno.ENODEV
    assert host.describe(serial_of("video"))["power"] == "<no such device>"
    host.advance(host.now + host.cfg.reboot_s + 1)
    assert files.read_text("power").endswith(" mW\n")


def test_a_hung_device_times_out_and_the_listing_says_so(host, serial_of, files):
    host.inject_fault(serial_of("video"), "hang")
    with pytest.raises(OSError) as hung:
        files.read_text("freq")
    assert hung.value.errno == errno.ETIMEDOUT
    shown = host.describe(serial_of("video"))
    assert set(shown) == set(files.paths()) and set(shown.values()) == {"<device not responding>"}
