"""A poll survives transient database and Redis failures within its slot, and otherwise
records a gap: a shard's cycle is written whole or not at all (issue 12, defect 1). The
store's own outages: tests/scenarios/test_tsdb_outage.py."""

import os
import shutil
import threading
import time

import psycopg
import pytest
from django.db import connection

from fleet import redis as fleet_redis
from fleet.models import Device
from fleet.polling import poller, snapshots
from tests.support.needs import missing, needs_postgres
from tests.support.processes import Service, free_port
from tests.support.tiers import starts_processes
from tests.support.tsdb import flush, samples_at

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def cycle_rows(cycle: float) -> set[int]:
    """The devices with samples at `cycle` in the store."""
    flush(newest=cycle)
    return {int(device) for name, device in samples_at(cycle, "asicmon_.+")}


def slot_with_room(seconds_left: float) -> float:
    """The current poll cycle, once at least `seconds_left` of its slot remain: a test that
    relies on retrying within the slot must not start just before the slot ends."""
    from django.conf import settings

    cycle = poller.current_cycle()
    if time.time() + seconds_left > cycle + settings.POLL_INTERVAL:
        time.sleep(max(0.0, cycle + settings.POLL_INTERVAL - time.time()) + 0.01)
        cycle = poller.current_cycle()
    return cycle


def test_a_dropped_database_connection_is_retried_within_the_slot(seeded_fleet, caplog):
    needs_postgres("terminating a server connection")
    cycle = slot_with_room(3.0)
    poller.poll_shard(0, cycle - 5)  # warm the monitors
    connection.ensure_connection()
    backend_pid = connection.connection.info.backend_pid
    settings_dict = connection.settings_dict
    with psycopg.connect(
        host=settings_dict["HOST"] or "127.0.0.1", port=settings_dict["PORT"] or 5432,
        user=settings_dict["USER"] or "postgres", dbname=settings_dict["NAME"], autocommit=True,
    ) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", [backend_pid])
    time.sleep(0.2)

    with caplog.at_level("INFO", logger="fleet.polling.poller"):
        result = poller.poll_shard(0, cycle)

    assert not result.gap
    assert "transient" in caplog.text
    shard_devices = set(Device.objects.filter(host__in=poller.Host.objects.in_shard(0, 2)).values_list("id", flat=True))
    assert cycle_rows(cycle) == shard_devices


class ThrowawayRedis:
    """A redis-server this test stops (killed, at once) and starts again on the same port."""

    def __init__(self):
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.server = None

    def start(self):
        self.server = Service(
            "redis", [shutil.which("redis-server"), "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                      "--appendonly", "no"], dict(os.environ),
        )
        deadline = time.time() + 10
        while time.time() < deadline:
            try:
                import redis

                if redis.Redis.from_url(self.url, socket_timeout=0.5).ping():
                    return
            except Exception:
                time.sleep(0.05)
        raise TimeoutError("redis-server did not start")

    def stop(self):
        if self.server is not None:
            self.server.stop(timeout=0)


@pytest.fixture
@starts_processes
def own_redis(settings, seeded_fleet):
    """The poll's Redis (snapshots and channel layer) is one this test can stop and start."""
    if shutil.which("redis-server") is None:
        missing("redis-server is not installed")
    from channels.layers import channel_layers

    server = ThrowawayRedis()
    server.start()
    original_url, original_layers = settings.REDIS_URL, settings.CHANNEL_LAYERS
    settings.REDIS_URL = server.url
    settings.CHANNEL_LAYERS = {
        "default": {**settings.CHANNEL_LAYERS["default"], "CONFIG": {
            **settings.CHANNEL_LAYERS["default"]["CONFIG"], "hosts": [server.url]}},
    }
    fleet_redis.get_redis.cache_clear()
    channel_layers.backends.clear()
    yield server
    server.stop()
    settings.REDIS_URL, settings.CHANNEL_LAYERS = original_url, original_layers
    fleet_redis.get_redis.cache_clear()
    channel_layers.backends.clear()


def test_redis_restarting_within_the_slot_loses_nothing(own_redis, settings):
    settings.POLL_INTERVAL = 10
    poller.poll_shard(1, poller.current_cycle() - 10)  # warm the monitors
    cycle = slot_with_room(7.0)  # the restart takes 1.5 s plus the server's start-up
    own_redis.stop()
    threading.Timer(1.5, own_redis.start).start()
    result = poller.poll_shard(1, cycle)
    assert not result.gap, result.gap
    assert result.devices == 4
    latest = snapshots.read_snapshots()
    assert {s["cycle"] for s in latest.values()} == {cycle}
    assert len(latest) == 4


def test_redis_down_past_the_slot_records_a_gap_and_writes_samples_whole(own_redis, settings, caplog):
    settings.POLL_INTERVAL = 2
    cycle = poller.current_cycle()
    own_redis.stop()
    with caplog.at_level("WARNING", logger="fleet.polling.poller"):
        result = poller.poll_shard(0, cycle)
    assert result.gap
    assert "a gap" in caplog.text
    assert time.time() <= cycle + settings.POLL_INTERVAL + 1.5  # gave up when the slot ended
    # The shard's samples of the cycle are all there or none is: never half.
    shard_devices = set(Device.objects.filter(host__in=poller.Host.objects.in_shard(0, 2)).values_list("id", flat=True))
    assert cycle_rows(cycle) in (set(), shard_devices)
