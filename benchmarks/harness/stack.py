"""The project's stack as benchmarks set it up: Django configured from the environment, a
throwaway database, Redis keys of their own, signed-in viewers, web processes and trace
workers, and fleets of emulated devices. Django is imported inside each function, so that a
benchmark without it never loads it."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from .processes import start_celery

INTERVAL = 5.0  # the poll interval the time-series benchmarks write at


def django_env(**env: Any):
    """Sets the environment (values as strings), then ``django.setup()`` with the project's
    settings: returns the django module."""
    os.environ.update({k: str(v) for k, v in env.items()})
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dashboard.settings")
    import django

    django.setup()
    return django


@contextmanager
def throwaway_database(*, close_connections: bool = False) -> Iterator[None]:
    """A test database made from the configured one for the block, dropped after it (with
    `close_connections`, every connection is closed first: threads may hold one)."""
    from django.test.utils import setup_databases, teardown_databases

    old = setup_databases(verbosity=0, interactive=False)
    try:
        yield
    finally:
        if close_connections:
            from django.db import connections

            connections.close_all()
        teardown_databases(old, verbosity=0)


def database_url(connection=None) -> str:
    """The URL of the database a connection uses (the default one when None): what a child
    process needs to reach the same (throwaway) database."""
    if connection is None:
        from django.db import connection
    db = connection.settings_dict
    if db["ENGINE"].endswith("sqlite3"):
        return f"sqlite:///{db['NAME']}"
    password = f":{db['PASSWORD']}" if db.get("PASSWORD") else ""
    return f"postgres://{db.get('USER') or 'postgres'}{password}@{db.get('HOST') or '127.0.0.1'}:{db.get('PORT') or 5432}/{db['NAME']}"


def wipe_redis(pattern: str, client=None) -> int:
    """Deletes the Redis keys matching `pattern` (the project's Redis by default): how many."""
    if client is None:
        from fleet.redis import get_redis

        client = get_redis()
    keys = list(client.scan_iter(pattern, count=1000))
    if keys:
        client.delete(*keys)
    return len(keys)


def trace_worker(queue: str, name: str, *, pool: str = "solo", concurrency: int = 1, **env: str):
    """A Celery worker on `queue` reaching this process's (throwaway) database."""
    return start_celery(
        queue,
        name,
        {**os.environ, "DATABASE_URL": database_url(), **env},
        pool=pool,
        concurrency=concurrency,
    )


def start_web(**env: Any):
    """A web process (Daphne, as the tests start it) on the throwaway database: (service, URL)."""
    from tests.support.processes import child_env
    from tests.support.processes import start_web as start

    return start(child_env(**env))


def signed_in_cookie(user) -> str:
    """The ``Cookie`` header of a session signed in as `user`."""
    from django.conf import settings
    from django.test import Client

    client = Client()
    client.force_login(user)
    return f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}"


def wait_for(ready, timeout: float, what: str, interval: float = 0.05):
    """Calls `ready()` every `interval` seconds until it returns something true (returned);
    exits with `what` after `timeout` seconds."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if found := ready():
            return found
        time.sleep(interval)
    raise SystemExit(f"{what} after {timeout:g} s")


def real_snapshots() -> list[dict]:
    """One poll's snapshots of every device of the configured emulated fleet (rates filled)."""
    from emulator import fleet_layout
    from fleet.hosts import emulated_fleet

    monitors = [
        emulated_fleet.host_monitor(h.name) for h in fleet_layout(emulated_fleet.fleet_config())
    ]
    now = time.time()
    for m in monitors:
        m.poll(now - 5)
    return [s for m in monitors for s in m.poll(now).values()]


def source_snapshots(hosts: int, cycles: int, end: float):
    """Per cycle (`INTERVAL` apart, ending at `end`), the snapshots of the first `hosts`
    emulated hosts' devices polled at that instant, with their type and model."""
    from emulator import fleet_layout
    from fleet.hosts import emulated_fleet

    layout = fleet_layout(emulated_fleet.fleet_config())[:hosts]
    specs = {d.serial: d for h in layout for d in h.devices}
    monitors = [emulated_fleet.host_monitor(h.name) for h in layout]
    start = end - cycles * INTERVAL
    for m in monitors:
        m.poll(start - INTERVAL)  # rates need a previous refresh
    for c in range(cycles):
        yield [
            {**s, "device_type": specs[serial].type, "model": specs[serial].model}
            for m in monitors
            for serial, s in m.poll(start + c * INTERVAL).items()
        ]


def fleet_keys(devices: int, first_snapshots: list[dict]):
    """The series keys of a fleet of `devices` (hosts of 8), each taking its type and model
    from one of `first_snapshots` in turn."""
    from fleet.tsdb.series import DeviceKey

    keys = []
    for d in range(devices):
        source = first_snapshots[d % len(first_snapshots)]
        keys.append(
            DeviceKey(
                f"bench-{d // 8:04d}",
                d + 1,
                f"BEN-{d + 1:05d}",
                source["device_type"],
                source.get("model") or source["device_type"].upper(),
                d % 8,
            )
        )
    return keys


def trace_env(workdir, prefix: str, **env: Any):
    """`django_env` as the trace benchmarks run it: emulator state and trace storage under
    `workdir`, Redis keys and the Celery queue named `prefix`, one host of three devices,
    50 GB of trace storage, the test client's and local hosts allowed."""
    return django_env(
        EMULATOR_STATE_DIR=workdir / "emulator", TRACE_STORAGE_DIR=workdir / "traces", REDIS_KEY_PREFIX=prefix,
        CELERY_QUEUE=prefix, FLEET_HOSTS="1", FLEET_DEVICES_PER_HOST="3", LOG_LEVEL="WARNING",
        TRACE_STORAGE_MAX_GB="50", ALLOWED_HOSTS="testserver,127.0.0.1,localhost", **env,
    )


def seeded_superuser(username: str = "bench", password: str = "bench-password-123"):
    """The emulated fleet in the database, the roles, and a superuser: the user."""
    from django.contrib.auth.models import User

    from fleet.hosts.emulated_fleet import seed_fleet
    from fleet.roles import ensure_roles

    seed_fleet()
    ensure_roles()
    return User.objects.create_superuser(username, password=password)
