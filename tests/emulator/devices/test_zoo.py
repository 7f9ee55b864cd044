"""The zoo of device types: every shipped spec registered under its name, a lookup that names
the known types, and types added from outside."""

import dataclasses

import pytest

from emulator.devices.zoo import DEVICE_TYPES, STANDARD_RULES, device_type, register_device_type


@pytest.fixture
def card9():
    yield
    DEVICE_TYPES.pop("card9", None)


def test_the_shipped_types_are_registered_each_with_its_rules():
    assert {"video", "inference", "gpu"} <= set(DEVICE_TYPES)
    assert all(name == t.name and t.machine is not None for name, t in DEVICE_TYPES.items())
    assert device_type("gpu") is DEVICE_TYPES["gpu"]


def test_an_unknown_type_is_refused_naming_the_known_ones():
    with pytest.raises(KeyError, match=r"unknown device type 'tpu'; known types: .*gpu, inference"):
        device_type("tpu")


def test_a_type_written_in_python_without_rules_runs_the_standard_ones(card9):
    card = dataclasses.replace(device_type("video"), name="card9", machine=None)
    registered = register_device_type(card)
    assert device_type("card9") is registered
    assert registered.machine is DEVICE_TYPES[STANDARD_RULES].machine
    replaced = register_device_type(dataclasses.replace(card, cores=16))
    assert device_type("card9") is replaced and replaced.cores == 16
