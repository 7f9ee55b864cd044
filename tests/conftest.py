"""Shared fixtures: one cast of users, a small seeded emulated fleet, clean Redis keys.

`make test` (python -m dashboard.stack test) points the suite at PostgreSQL and Redis
when they answer, and at SQLite and a throwaway redis-server otherwise.
"""

import pytest

TEST_PREFIX = "asicmon-test"


def pytest_configure(config):
    """Never touch a running dashboard's keys or queue, even under a bare `pytest`."""
    from django.conf import settings

    # Threads of async tests open their own connections: close them after each use, so
    # that the test database can be dropped at the end.
    settings.DATABASES["default"]["CONN_MAX_AGE"] = 0
    settings.STATIC_ROOT.mkdir(parents=True, exist_ok=True)
    if "test" not in settings.REDIS_KEY_PREFIX:
        settings.REDIS_KEY_PREFIX = TEST_PREFIX
        settings.CHANNEL_LAYERS["default"]["CONFIG"]["prefix"] = f"{TEST_PREFIX}:ws"
        settings.CELERY_TASK_DEFAULT_QUEUE = TEST_PREFIX


@pytest.fixture
def clean_redis():
    """Delete this suite's keys before and after a test that uses Redis."""
    from django.conf import settings

    from fleet.redis import get_redis

    def wipe():
        client = get_redis()
        keys = list(client.scan_iter(f"{settings.REDIS_KEY_PREFIX}:*", count=1000))
        if keys:
            client.delete(*keys)

    wipe()
    yield get_redis()
    wipe()


@pytest.fixture
def fleet_settings(settings, tmp_path):
    """A small fleet (2 hosts x 4 devices, three types) whose emulator state lives in tmp_path."""
    from fleet import emulated_fleet

    settings.FLEET_SEED = 7
    settings.FLEET_HOSTS = 2
    settings.FLEET_DEVICES_PER_HOST = 4
    settings.FLEET_TYPES = ("video", "inference", "gpu")
    settings.EMULATOR_STATE_DIR = tmp_path / "emulator"
    settings.POLL_SHARDS = 2
    emulated_fleet.host_monitor.cache_clear()
    yield settings
    emulated_fleet.host_monitor.cache_clear()


@pytest.fixture
def seeded_fleet(fleet_settings, clean_redis):
    from fleet.emulated_fleet import seed_fleet
    from fleet.models import Device

    seed_fleet()
    return list(Device.objects.for_dashboard())


@pytest.fixture
def gpu_fleet(settings, tmp_path, clean_redis):
    """A fleet of GPU-like devices only (tests.support.jobs.GPU_FLEET), seeded, for jobs."""
    from fleet import emulated_fleet
    from fleet.emulated_fleet import seed_fleet
    from fleet.models import Device
    from tests.support.jobs import GPU_FLEET

    for name, value in GPU_FLEET.items():
        setattr(settings, name, value)
    settings.EMULATOR_STATE_DIR = tmp_path / "emulator"
    settings.POLL_SHARDS = 1
    emulated_fleet.host_monitor.cache_clear()
    seed_fleet()
    yield list(Device.objects.select_related("host").order_by("host__name", "index"))
    emulated_fleet.host_monitor.cache_clear()


@pytest.fixture
def polled_fleet(seeded_fleet):
    """The seeded fleet, polled for the three cycles ending at POLLED_CYCLE (every shard)."""
    from fleet import polling
    from tests.support.fleet import POLLED_CYCLE

    for offset in (-2, -1, 0):
        for shard in polling.shards():
            polling.poll_shard(shard, POLLED_CYCLE + offset * 5.0)
    return seeded_fleet


def _user(username: str, *groups: str):
    from django.contrib.auth.models import Group, User

    from fleet.roles import ensure_roles

    ensure_roles()
    user = User.objects.create_user(username=username, password=f"{username}-password-123")
    user.groups.add(*Group.objects.filter(name__in=groups))
    return user


@pytest.fixture
def viewer(db):
    return _user("vera", "viewers")


@pytest.fixture
def operator(db):
    return _user("otto", "viewers", "operators")


@pytest.fixture
def outsider(db):
    """Signed in, but in no role: may see nothing."""
    return _user("oscar")


@pytest.fixture
def api_client():
    from rest_framework.test import APIClient

    return APIClient()
