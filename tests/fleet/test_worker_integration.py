"""A real Celery worker, the real Redis broker and the real database."""

import time

import pytest

from fleet import samples, services, snapshots
from fleet.models import Sample
from fleet.tasks import poll_fleet
from tests.support.processes import child_env, start_worker

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
def worker(seeded_fleet):
    service = start_worker(child_env())
    yield service
    service.stop()


def test_worker_poll_writes_samples_once_and_matches_the_snapshot(worker, seeded_fleet):
    cycle = services.current_cycle()
    poll_fleet.delay(cycle)
    wait_until(lambda: len(snapshots.read_snapshots()) == len(seeded_fleet))
    # Every device's series landed for this cycle.
    count = wait_until(lambda: Sample.objects.count() or None)
    assert Sample.objects.filter(ts__lt=Sample.objects.order_by("ts").first().ts).count() == 0
    first_seen = {d: s["sample_ts"] for d, s in snapshots.read_snapshots().items()}

    temperature = samples.counter_ids()["temperature_c"]
    for device_id, snap in snapshots.read_snapshots().items():
        assert snap["cycle"] == cycle
        stored = Sample.objects.get(device_id=device_id, counter_id=temperature, ts__gte=cycle_dt(cycle))
        assert stored.value == pytest.approx(snap["temperature_c"])

    # The same cycle again (a retry, a duplicate beat): snapshots refresh, samples do not grow.
    poll_fleet.delay(cycle)
    wait_until(
        lambda: all(s["sample_ts"] > first_seen[d] for d, s in snapshots.read_snapshots().items())
    )
    assert Sample.objects.count() == count
    assert "poll_shard" in worker.output()


def cycle_dt(cycle):
    from datetime import UTC, datetime

    return datetime.fromtimestamp(cycle, tz=UTC)
