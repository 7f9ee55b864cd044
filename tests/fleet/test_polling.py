"""The poll service against the real database and Redis (no worker: called directly)."""

import pytest

from fleet import emulated_fleet, polling, rollups, samples, snapshots
from fleet.models import Sample

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


def poll_all(cycle: float) -> list[polling.ShardPollResult]:
    return [polling.poll_shard(shard, cycle) for shard in polling.shards()]


def test_a_poll_cycle_writes_samples_and_snapshots_for_every_device(seeded_fleet):
    cycle = polling.current_cycle()
    first = poll_all(cycle - fleet_interval())  # rates and utilization need a previous refresh
    results = poll_all(cycle)

    assert sum(r.devices for r in results) == len(seeded_fleet)
    assert Sample.objects.count() == sum(r.samples for r in first + results) > 0
    latest = snapshots.read_snapshots()
    assert set(latest) == {d.id for d in seeded_fleet}
    temperature = samples.counter_ids()["temperature_c"]
    for device in seeded_fleet:
        snap = latest[device.id]
        assert snap["cycle"] == cycle
        assert 0.0 <= snap["device_utilization"] <= 1.0
        stored = Sample.objects.filter(device=device, counter_id=temperature).latest("ts")
        assert stored.value == pytest.approx(snap["temperature_c"])
        assert stored.ts.timestamp() == cycle


def test_repeating_a_cycle_adds_no_samples_and_keeps_the_first_values(seeded_fleet):
    cycle = polling.current_cycle()
    poll_all(cycle - fleet_interval())  # warm-up: from now on every rate has a value
    poll_all(cycle)
    before = set(Sample.objects.values_list("device_id", "counter_id", "ts", "value"))
    poll_all(cycle)
    assert set(Sample.objects.values_list("device_id", "counter_id", "ts", "value")) == before


def test_next_cycle_adds_a_new_sample_per_series(seeded_fleet):
    cycle = polling.current_cycle()
    poll_all(cycle - fleet_interval())
    poll_all(cycle)
    count = Sample.objects.filter(ts=cycle_dt(cycle)).count()
    poll_all(cycle + fleet_interval())
    assert Sample.objects.filter(ts=cycle_dt(cycle + fleet_interval())).count() == count > 0


def test_a_late_retry_does_not_roll_snapshots_back(seeded_fleet):
    cycle = polling.current_cycle()
    poll_all(cycle + fleet_interval())
    poll_all(cycle)  # an older cycle's task arriving late
    assert {s["cycle"] for s in snapshots.read_snapshots().values()} == {cycle + fleet_interval()}


def test_each_shard_polls_its_own_hosts_only(seeded_fleet):
    cycle = polling.current_cycle()
    first = polling.poll_shard(0, cycle)
    assert 0 < first.devices < len(seeded_fleet)
    assert len(snapshots.read_snapshots()) == first.devices


def fleet_interval() -> float:
    from django.conf import settings

    return settings.POLL_INTERVAL


def cycle_dt(cycle: float):
    from datetime import UTC, datetime

    return datetime.fromtimestamp(cycle, tz=UTC)


def test_a_hung_device_is_critical_and_does_not_hold_up_its_shard(seeded_fleet, fleet_settings):
    import time

    from fleet.sharding import shard_of_host

    fleet_settings.PROBE_TIMEOUT = 0.3
    emulated_fleet.host_monitor.cache_clear()
    cycle = polling.current_cycle()
    poll_all(cycle - fleet_interval())
    hung = seeded_fleet[0]
    emulated_fleet.host_monitor(hung.host.name).inject_fault(hung.serial, "hang")

    started = time.perf_counter()
    result = polling.poll_shard(shard_of_host(hung.host_id), cycle)
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


def test_deleting_a_device_deletes_its_samples(seeded_fleet):
    poll_all(polling.current_cycle())
    gone, kept = seeded_fleet[0], seeded_fleet[1]
    assert Sample.objects.filter(device=gone).exists()
    gone.delete()
    assert not Sample.objects.filter(device_id=gone.id).exists()
    assert Sample.objects.filter(device=kept).exists()


def test_pruning_removes_samples_past_retention_only(seeded_fleet):
    import time

    from django.db import connection

    now_cycle = polling.current_cycle()
    old_cycle = polling.current_cycle(time.time() - 50 * 3600)
    kept_cycle = polling.current_cycle(time.time() - 47 * 3600)  # within retention, just
    for cycle in (old_cycle, kept_cycle, now_cycle):
        poll_all(cycle)
    counts = {c: Sample.objects.filter(ts=cycle_dt(c)).count() for c in (old_cycle, kept_cycle, now_cycle)}
    assert all(counts.values())

    result = rollups.prune(raw_hours=48)

    assert not Sample.objects.filter(ts=cycle_dt(old_cycle)).exists()
    assert Sample.objects.filter(ts=cycle_dt(kept_cycle)).count() == counts[kept_cycle]
    assert Sample.objects.filter(ts=cycle_dt(now_cycle)).count() == counts[now_cycle]
    if connection.vendor == "postgresql":  # the old hour's partition went whole
        assert f"fleet_sample_p{cycle_dt(old_cycle):%Y%m%d%H}" in result.dropped
    else:
        assert result.deleted["fleet_sample"] == counts[old_cycle]
