"""The emulated fleet before and after its device types moved into their Asimov specs.

`fleet_hour` runs one host of every shipped emulated type for an hour of simulated time,
injects every fault kind (physics faults and driver-error cascades) at set times, resets
and clears some of them, and records each device's state and what its driver shows every
minute. The digest of that record was written by the hand-written emulator before the
move (fixtures/fleet_hour.json); the spec-generated doubles must give the same record:
identical, sample for sample (tolerance 0).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from emulator import FAULTS, EmulatedHost, FleetConfig
from emulator.devices.driver_errors import DRIVER_FAULTS

FIXTURE = Path(__file__).parent / "fixtures" / "fleet_hour.json"
T0 = 1_700_000_000.0
TYPES = ("video", "inference", "gpu")
ALL_FAULTS = (*FAULTS, *DRIVER_FAULTS)


def fleet_hour(types: tuple[str, ...] = TYPES, seed: int = 7) -> dict[str, list]:
    """Minute samples of every device of a seeded host through one simulated hour."""
    per_type = 4
    host = EmulatedHost(
        FleetConfig(seed=seed, hosts=1, devices_per_host=per_type * len(types), types=types, hang_block_s=0.0),
        "host-00",
    )
    host.sync(T0)
    serials = list(host.states)
    # fault k goes to device k (mod the host's devices) at minute 3 + 2k
    plan = {3 + 2 * k: (serials[k % len(serials)], f) for k, f in enumerate(ALL_FAULTS)}
    samples: dict[str, list] = {s: [] for s in serials}
    samples["kernel_log"] = []
    samples["injected"] = []
    for minute in range(61):
        t = T0 + 60 * minute
        host.advance(t)
        if minute in plan:
            serial, fault = plan[minute]
            before = len(host.kernel_log)
            host.inject_fault(serial, fault)
            shown = fault in host.state(serial).faults or len(host.kernel_log) > before
            samples["injected"].append([minute, serial, fault, shown])
        if minute == 40:  # remediation: a reset of the first faulted device, a cleared fault
            host.reboot(serials[0])
            host.clear_fault(serials[1], ALL_FAULTS[1])
        for serial in serials:
            state = host.state(serial).to_json()
            view = {} if "hang" in state["faults"] else host.describe(serial)
            samples[serial].append({"state": state, "driver": view})
        samples["kernel_log"].append(host.take_kernel_log())
    return samples


def digest(samples: dict[str, list]) -> str:
    text = json.dumps(samples, sort_keys=True, default=repr)
    return hashlib.sha256(text.encode()).hexdigest()


def record() -> dict:
    samples = fleet_hour()
    return {
        "digest": digest(samples),
        "per_device": {s: digest({s: v}) for s, v in samples.items()},
        "last": {s: v[-1] for s, v in samples.items()},
    }


@pytest.mark.slow  # an emulated fleet-hour twice over
def test_fleet_hour_is_the_same_as_the_hand_written_emulator_gave():
    want = json.loads(FIXTURE.read_text())
    got = json.loads(json.dumps(record(), default=repr))
    for serial, d in want["per_device"].items():
        assert got["per_device"][serial] == d, f"{serial} differs: {got['last'][serial]} != {want['last'][serial]}"
    assert got["digest"] == want["digest"]


@pytest.mark.slow
def test_every_fault_kind_shows_in_the_hour():
    samples = fleet_hour()
    shown = {fault for _, _, fault, shown in samples["injected"] if shown}
    assert shown == set(ALL_FAULTS)  # in the device's state, or in its kernel log
    assert sum(len(lines) for lines in samples["kernel_log"]) > len(DRIVER_FAULTS)


if __name__ == "__main__":  # rewrite the fixture (only with the reference emulator)
    FIXTURE.write_text(json.dumps(record(), indent=1, sort_keys=True, default=repr) + "\n")
