"""Property tests of the device physics: bounds, utilization range, monotonic counters."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from emulator import FAULTS, EmulatedHost, FleetConfig
from emulator.devices.zoo import DEVICE_TYPES, device_type
from tests.support.examples import examples

T0 = 1_700_000_000.0
TYPES = ("video", "inference", "gpu", "mtx")  # mtx: a type from its spec alone
steps = st.lists(st.floats(min_value=0.05, max_value=400.0), min_size=1, max_size=12)
fault_sets = st.sets(st.sampled_from(FAULTS), max_size=3)


def _host(seed: int, dtype: str) -> EmulatedHost:
    host = EmulatedHost(
        FleetConfig(seed=seed, hosts=1, devices_per_host=1, types=(dtype,)), "host-00"
    )
    host.sync(T0)
    return host


@settings(max_examples=examples(40), deadline=None)
@given(
    seed=st.integers(0, 2**32),
    dtype=st.sampled_from(TYPES),
    gaps=steps,
    faults=fault_sets,
    start=st.floats(0, 86400),
)
def test_temperature_power_and_activity_stay_physical(seed, dtype, gaps, faults, start):
    host = _host(seed, dtype)
    d = device_type(dtype)
    (state,) = host.states.values()
    for f in faults:
        host.inject_fault(state.serial, f)
    t = T0 + start
    for gap in gaps:
        t += gap
        host.advance(t)
        assert d.ambient_c - 1e-9 <= state.temperature_c <= d.max_temperature_c
        assert 0 <= state.power_w <= d.tdp_w * 1.15
        assert d.min_clock_mhz - 1e-9 <= state.clock_mhz <= d.max_clock_mhz + 1e-9
        assert all(0.0 <= a <= 1.0 for a in state.core_activity)
        assert 0 <= state.memory_used_bytes <= d.memory_bytes


COUNTERS = ("core_active_cycles", "core_total_cycles", "core_busy_us")
SCALARS = (
    "ecc_corrected",
    "ecc_uncorrected",
    "pcie_errors",
    "dma_to_device_bytes",
    "dma_from_device_bytes",
    "energy_mj",
    "work_items",
)


@settings(max_examples=examples(40), deadline=None)
@given(
    seed=st.integers(0, 2**32),
    dtype=st.sampled_from(TYPES),
    gaps=steps,
    faults=fault_sets,
    reboot=st.booleans(),
)
def test_monotonic_counters_never_go_back(seed, dtype, gaps, faults, reboot):
    host = _host(seed, dtype)
    (state,) = host.states.values()
    for f in faults:
        host.inject_fault(state.serial, f)
    if reboot:
        host.reboot(state.serial)
    t = T0
    before = {k: list(getattr(state, k)) for k in COUNTERS} | {
        k: getattr(state, k) for k in SCALARS
    }
    for gap in gaps:
        t += gap
        host.advance(t)
        for k in COUNTERS:
            now = getattr(state, k)
            assert all(b >= a for a, b in zip(before[k], now, strict=True)), k
            assert (
                all(
                    a <= tot
                    for a, tot in zip(
                        state.core_active_cycles, state.core_total_cycles, strict=True
                    )
                )
                or k != "core_active_cycles"
            )
            before[k] = list(now)
        for k in SCALARS:
            assert getattr(state, k) >= before[k], k
            before[k] = getattr(state, k)


@settings(max_examples=examples(25), deadline=None)
@given(seed=st.integers(0, 2**32), dtype=st.sampled_from(TYPES), gaps=steps)
def test_driver_counters_only_go_back_by_a_wrap(seed, dtype, gaps):
    """What a driver shows is the true count modulo the hardware width."""
    host = _host(seed, dtype)
    (state,) = host.states.values()
    d = device_type(dtype)
    width = 1 << d.counter_bits
    t = T0
    prev = [c % width for c in state.core_total_cycles]
    for gap in gaps:
        true_before = list(state.core_total_cycles)
        t += gap
        host.advance(t)
        shown = [c % width for c in state.core_total_cycles]
        for p, s, tb, ta in zip(prev, shown, true_before, state.core_total_cycles, strict=True):
            if s < p:
                assert ta // width > tb // width  # it wrapped
            assert (s - p) % width == (ta - tb) % width
        prev = shown


@settings(max_examples=examples(15), deadline=None)
@given(seed=st.integers(0, 2**32), gaps=steps)
def test_a_run_is_reproducible_from_its_seed(seed, gaps):
    runs = []
    for _ in range(2):
        host = EmulatedHost(FleetConfig(seed=seed, hosts=1, devices_per_host=3), "host-00")
        host.sync(T0)
        t = T0
        for gap in gaps:
            t += gap
            host.advance(t)
        runs.append({s: st.to_json() for s, st in host.states.items()})
    assert runs[0] == runs[1]


def test_load_follows_the_daily_demand_curve():
    host = _host(1, "inference")
    (state,) = host.states.values()
    loads = {}
    for hour in range(0, 48, 1):
        host.advance(T0 + hour * 3600)
        loads[hour % 24] = state.load
    assert max(loads.values()) - min(loads.values()) > 0.4


def test_every_type_is_registered_with_a_driver():
    from emulator.devices.drivers import DRIVERS

    for dtype in DEVICE_TYPES.values():
        assert dtype.driver in DRIVERS
