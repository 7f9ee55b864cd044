"""The poll service against the real database and Redis (no worker: called directly)."""

import pytest

from fleet.hosts import emulated_fleet
from fleet.polling import poller, snapshots
from fleet.tsdb.series import series_name
from tests.support.tsdb import flush, samples_at

pytestmark = pytest.mark.django_db


def test_seeding_twice_creates_the_fleet_once(fleet_settings):
    first = emulated_fleet.seed_fleet()
    second = emulated_fleet.seed_fleet()
    assert (first.hosts_created, first.devices_created) == (2, 8)
    assert (second.hosts_created, second.devices_created) == (0, 0)
    assert second.devices_total == 8


def test_seeded_fleet_mixes_device_types_on_every_host(seeded_fleet):
    by_host = {}
    for device in seeded_fleet:
        by_host.setdefault(device.host.name, set()).add(device.device_type)
    assert len(by_host) == 2
    assert all(len(types) >= 2 for types in by_host.values())


def poll_all(cycle: float) -> list[poller.ShardPollResult]:
    return [poller.poll_shard(shard, cycle) for shard in poller.shards()]


def test_a_poll_cycle_writes_samples_and_snapshots_for_every_device(seeded_fleet):
    cycle = poller.current_cycle()
    first = poll_all(cycle - fleet_interval())  # rates and utilization need a previous refresh
    results = poll_all(cycle)

    assert sum(r.devices for r in results) == len(seeded_fleet)
    flush(newest=cycle)
    stored = samples_at(cycle)
    assert len(stored) == sum(r.samples for r in results) > 0
    assert len(samples_at(cycle - fleet_interval())) == sum(r.samples for r in first)
    latest = snapshots.read_snapshots()
    assert set(latest) == {d.id for d in seeded_fleet}
    temperature = series_name("temperature_c")
    for device in seeded_fleet:
        snap = latest[device.id]
        assert snap["cycle"] == cycle
        assert 0.0 <= snap["device_utilization"] <= 1.0
        assert stored[(temperature, str(device.id))] == [pytest.approx(snap["temperature_c"])]


def test_repeating_a_cycle_adds_no_samples(seeded_fleet):
    cycle = poller.current_cycle()
    poll_all(cycle - fleet_interval())  # warm-up: from now on every rate has a value
    poll_all(cycle)
    flush(newest=cycle)
    before = samples_at(cycle)
    poll_all(cycle)
    flush(newest=cycle)
    after = samples_at(cycle)
    assert set(after) == set(before) and all(len(values) == 1 for values in after.values())


def test_next_cycle_adds_a_new_sample_per_series(seeded_fleet):
    cycle = poller.current_cycle() - fleet_interval()  # cycles gone by: readable a second after
    poll_all(cycle - fleet_interval())
    poll_all(cycle)
    poll_all(cycle + fleet_interval())
    flush(newest=cycle + fleet_interval())
    count = len(samples_at(cycle))
    assert len(samples_at(cycle + fleet_interval())) == count > 0


def test_a_late_retry_does_not_roll_snapshots_back(seeded_fleet):
    cycle = poller.current_cycle()
    poll_all(cycle + fleet_interval())
    poll_all(cycle)  # an older cycle's task arriving late
    assert {s["cycle"] for s in snapshots.read_snapshots().values()} == {cycle + fleet_interval()}


def test_each_shard_polls_its_own_hosts_only(seeded_fleet):
    cycle = poller.current_cycle()
    first = poller.poll_shard(0, cycle)
    assert 0 < first.devices < len(seeded_fleet)
    assert len(snapshots.read_snapshots()) == first.devices


def fleet_interval() -> float:
    from django.conf import settings

    return settings.POLL_INTERVAL


def test_a_hung_device_is_critical_and_does_not_hold_up_its_shard(seeded_fleet, fleet_settings):
    import time

    from fleet.polling.sharding import shard_of_host

    fleet_settings.PROBE_TIMEOUT = 0.3
    emulated_fleet.host_monitor.cache_clear()
    cycle = poller.current_cycle()
    poll_all(cycle - fleet_interval())
    hung = seeded_fleet[0]
    emulated_fleet.host_monitor(hung.host.name).inject_fault(hung.serial, "hang")

    started = time.perf_counter()
    result = poller.poll_shard(shard_of_host(hung.host_id), cycle)
    elapsed = time.perf_counter() - started

    assert elapsed < 0.3 + 1.0  # one probe budget, not one per device nor the driver's block
    latest = snapshots.read_snapshots()
    assert latest[hung.id]["driver_status"] == "hung"
    assert latest[hung.id]["health"] == "critical"
    neighbours = [d for d in seeded_fleet if d.host_id == hung.host_id and d.id != hung.id]
    shard = shard_of_host(hung.host_id)
    assert result.devices == sum(shard_of_host(d.host_id) == shard for d in seeded_fleet)
    assert all(latest[d.id]["driver_status"] == "ok" for d in neighbours)
    assert all(latest[d.id]["cycle"] == cycle for d in neighbours)
