"""A real Celery worker, the real Redis broker and the real database."""

import time

import pytest

from fleet.hosts import emulated_fleet
from fleet.polling import poller, snapshots
from fleet.tasks import poll_fleet
from fleet.tsdb.series import series_name
from tests.support.processes import child_env, start_worker
from tests.support.tiers import starts_processes
from tests.support.tsdb import flush, samples_at, wait_for_samples

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def wait_until(condition, timeout=60.0, interval=0.1):
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(interval)
    raise TimeoutError("condition never became true")


@pytest.fixture
@starts_processes
def worker(seeded_fleet):
    service = start_worker(child_env())
    yield service
    service.stop()


def poll_and_wait(cycle: float, devices: int) -> dict:
    """Queue a fleet poll through the broker and wait until the worker has stored it."""
    poll_fleet.delay(cycle)
    return wait_until(
        lambda: (
            (latest := snapshots.read_snapshots())
            and len(latest) == devices
            and all(s["cycle"] == cycle for s in latest.values())
            and latest
        )
    )


def test_worker_poll_writes_samples_once_and_matches_the_snapshot(worker, seeded_fleet):
    cycle = poller.current_cycle()
    poll_and_wait(cycle - 5.0, len(seeded_fleet))  # warm-up: rates need a previous refresh
    latest = poll_and_wait(cycle, len(seeded_fleet))
    temperature = series_name("temperature_c")
    wait_for_samples(cycle, len(seeded_fleet), names=temperature)
    first = wait_for_samples(cycle, len(samples_at(cycle - 5.0)))
    assert {device for name, device in first if name == temperature} == {str(d.id) for d in seeded_fleet}
    first_seen = {d: s["sample_ts"] for d, s in latest.items()}
    for device_id, snap in latest.items():
        assert first[(temperature, str(device_id))] == [pytest.approx(snap["temperature_c"])]

    # The same cycle again (a retry, a duplicate beat): snapshots refresh, samples do not grow.
    poll_fleet.delay(cycle)
    wait_until(
        lambda: all(s["sample_ts"] > first_seen[d] for d, s in snapshots.read_snapshots().items())
    )
    time.sleep(1.0)  # the samples go after the snapshots
    flush(newest=cycle)
    again = samples_at(cycle)
    assert set(again) == set(first) and all(len(values) == 1 for values in again.values())


def test_a_worker_process_killed_mid_cycle_loses_and_duplicates_nothing(seeded_fleet, fleet_settings):
    import os
    import signal
    import subprocess

    from fleet.polling.sharding import shard_of_host

    # A hung device makes its shard's task block for the driver's 2 s: time to kill it.
    hung = seeded_fleet[0]
    emulated_fleet.host_monitor(hung.host.name).inject_fault(hung.serial, "hang")
    # The shard tasks expire after 0.9 poll intervals: a long interval for this worker keeps
    # the redelivered task alive however slowly a loaded machine brings the new child up.
    worker = start_worker(child_env(PROBE_TIMEOUT="5", POLL_INTERVAL="60"))
    try:
        cycle = poller.current_cycle()
        poll_fleet.delay(cycle)
        time.sleep(1.0)
        children = subprocess.run(
            ["pgrep", "-P", str(worker.proc.pid)], capture_output=True, text=True, check=True
        ).stdout.split()
        for pid in children:
            os.kill(int(pid), signal.SIGKILL)
        latest = wait_until(
            lambda: (
                (s := snapshots.read_snapshots())
                and len(s) == len(seeded_fleet)
                and all(v["cycle"] == cycle for v in s.values())
                and s
            ),
            timeout=60,
        )
        assert "SIGKILL" in worker.output()  # the kill did land on a running task
    finally:
        worker.stop()

    assert latest[hung.id]["driver_status"] == "hung"
    shard = shard_of_host(hung.host_id)
    redone = [d for d in seeded_fleet if shard_of_host(d.host_id) == shard and d.id != hung.id]
    temperature = series_name("temperature_c")
    written = wait_for_samples(cycle, len(redone), names=temperature)
    assert {str(d.id) for d in redone} <= {device for _, device in written}
    assert all(len(values) == 1 for values in written.values())
