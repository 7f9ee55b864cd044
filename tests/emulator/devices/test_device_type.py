"""A device type: its hardware numbers, the numbers of its update rules and faults as plain
attributes (its spec's, else the defaults), and the firmware each software version ships."""

import dataclasses

import pytest

from emulator.devices.device_type import DeviceType, fault_number


def _card(**fields) -> DeviceType:
    base = dict(
        name="card",
        model="Card 1",
        serial_prefix="CRD",
        driver="sysfs",
        cores=2,
        max_clock_mhz=1000.0,
        min_clock_mhz=200.0,
        memory_bytes=1 << 30,
        model_memory_bytes=1 << 28,
        working_memory_bytes=1 << 27,
        idle_w=10.0,
        tdp_w=100.0,
    )
    return DeviceType(**{**base, **fields})


def test_rules_and_faults_left_out_take_their_defaults():
    card = _card()
    assert (card.throttle_down_per_s, card.throttle_up_per_s, card.throttle_hysteresis_c) == (
        0.08,
        0.1,
        3,
    )
    assert card.power_clock_exponent == 1.5 and card.job_load == 0.95
    assert card.overheat_resistance_factor == 3.0
    assert (card.pcie_degraded_gens_down, card.pcie_degraded_width_divisor) == (2, 4)


def test_a_types_own_numbers_replace_the_defaults():
    card = _card(rules={"throttle": (0.5, 0.2, 6)}, faults={"ecc_storm": (900.0, 1.5)})
    assert (card.throttle_down_per_s, card.throttle_hysteresis_c) == (0.5, 6)
    assert (card.ecc_storm_corrected_per_s, card.ecc_storm_uncorrected_per_s) == (900.0, 1.5)
    assert (
        fault_number(card, "ecc_storm", 1) == 1.5 and fault_number(card, "memory_leak", 0) == 0.001
    )
    with pytest.raises(ValueError):
        _card(rules={"throttle": (0.5,)})  # a rule's numbers come whole


def test_the_hottest_a_device_gets_grows_with_its_overheat_fault():
    plain, hotter = _card(), _card(faults={"overheat": (5.0,)})
    assert plain.max_temperature_c == pytest.approx(30.0 + 100.0 * 1.15 * 0.5 * 3.0)
    assert hotter.max_temperature_c > plain.max_temperature_c
    mild = _card(faults={"overheat": (0.5,)})  # a factor below 1 never cools it below normal
    assert mild.max_temperature_c == pytest.approx(30.0 + 100.0 * 1.15 * 0.5)


def test_firmware_follows_the_software_version_and_the_machine_is_not_compared():
    card = _card(firmware={"2.1": "3.2.4"})
    assert card.firmware_for("2.1") == "3.2.4" and card.firmware_for("1.5") == "1.5.0"
    assert dataclasses.replace(card, machine=object()) == card
