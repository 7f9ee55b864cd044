"""The load-balancing signal: which devices may serve, their weight and headroom, and the
totals by type, host and fleet."""

import pytest

from fleet.models import Device, Host
from fleet.reading.capacity import device_capacity, totals

T0 = 1_700_000_000.0


def _device(
    serial: str, state: str = "in_service", host: str = "host-00", dtype: str = "gpu"
) -> Device:
    return Device(
        id=ord(serial[0]), serial=serial, state=state, device_type=dtype, host=Host(name=host)
    )


def _snapshot(**counters) -> dict:
    return {"driver_status": "ok", "sample_ts": T0, "temperature_c": 50.0, **counters}


@pytest.fixture(autouse=True)
def _interval(settings):
    settings.POLL_INTERVAL = 10


def test_a_healthy_device_in_service_weighs_its_idle_share():
    row = device_capacity(_device("A"), _snapshot(device_utilization=0.25), T0 + 1)
    assert row.may_serve and row.health == "healthy"
    assert (row.headroom, row.weight, row.utilization) == (0.75, 75, 0.25)


def test_a_busy_device_that_may_serve_keeps_a_weight_of_one_and_a_warning_halves_it():
    assert device_capacity(_device("A"), _snapshot(device_utilization=1.0), T0).weight == 1
    warm = device_capacity(_device("B"), _snapshot(device_utilization=0.2, temperature_c=90.0), T0)
    assert warm.health == "warning" and warm.weight == 40


@pytest.mark.parametrize(
    ("device", "snapshot", "now"),
    [
        (_device("A", state="drained"), _snapshot(device_utilization=0.1), T0),
        (_device("A"), _snapshot(device_utilization=0.1, temperature_c=99.0), T0),  # critical
        (_device("A"), _snapshot(device_utilization=0.1), T0 + 3600),  # no recent data
        (_device("A"), None, T0),
    ],
    ids=["drained", "critical", "stale", "never_polled"],
)
def test_a_device_out_of_service_critical_or_unknown_may_not_serve(device, snapshot, now):
    row = device_capacity(device, snapshot, now)
    assert not row.may_serve and row.weight == 0 and row.headroom == 0.0


def test_totals_count_devices_serving_weight_and_headroom_per_group():
    rows = [
        device_capacity(_device("A", host="h1"), _snapshot(device_utilization=0.5), T0),
        device_capacity(
            _device("B", host="h1", dtype="video"), _snapshot(device_utilization=0.0), T0
        ),
        device_capacity(_device("C", host="h2", state="repair"), _snapshot(), T0),
    ]
    assert totals(rows, "host") == {
        "h1": {"devices": 2, "serving": 2, "weight": 150, "headroom": 1.5},
        "h2": {"devices": 1, "serving": 0, "weight": 0, "headroom": 0.0},
    }
    assert totals(rows, "fleet")["fleet"]["devices"] == 3
    assert totals([], "type") == {}
