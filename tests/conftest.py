"""Shared fixtures: one cast of users, a small seeded emulated fleet, clean Redis keys.

`make test` (python -m dashboard.stack test) points the suite at PostgreSQL and Redis
when they answer, and at SQLite and a throwaway redis-server otherwise. Tests are sorted
into tiers here (tests/support/tiers.py); under pytest-xdist every worker has its own
database, Redis keys, queues and folders.
"""

import functools
import gc
import os
import shutil
import tempfile
from pathlib import Path

import pytest

from tests.support import tiers
from tests.support.browser import (  # noqa: F401 (fixtures)
    browser,
    live_stack,
    module_stack,
    module_trace_stack,
    stack_settings,
    trace_stack,
)
from tests.support.fleet import POLLED_CYCLE, TEST_FLEET
from tests.support.tsdb import prometheus_store, unique_labels, victoria_metrics  # noqa: F401 (fixtures)

TEST_PREFIX = "asicmon-test"
CHILDREN_BEFORE = pytest.StashKey[dict]()


def pytest_configure(config):
    """Never touch a running dashboard's keys, queue or files, nor another xdist worker's."""
    from django.conf import settings

    # Threads of async tests open their own connections: close them after each use, so
    # that the test database can be dropped at the end.
    settings.DATABASES["default"]["CONN_MAX_AGE"] = 0
    settings.STATIC_ROOT.mkdir(parents=True, exist_ok=True)
    prefix = settings.REDIS_KEY_PREFIX if "test" in settings.REDIS_KEY_PREFIX else TEST_PREFIX
    worker = tiers.xdist_worker()
    if worker:  # pytest-django gives the worker's database the same suffix
        prefix = f"{prefix}-{worker}"
    settings.REDIS_KEY_PREFIX = prefix
    settings.CHANNEL_LAYERS["default"]["CONFIG"]["prefix"] = f"{prefix}:ws"
    settings.CACHES["default"]["KEY_PREFIX"] = f"{prefix}:cache"
    settings.CELERY_TASK_DEFAULT_QUEUE = prefix
    use_own_folders(config, settings, prefix)
    use_high_api_rates(settings)
    load_hypothesis_profile(settings.VAR_DIR)
    scan_static_files_once()
    flush_by_delete(settings)


#: The API's rate limits in tests, here and in the processes tests start: a test's calls (and
#: a module's, as one user id in one minute) stay far below them; tests of the limits set their own.
TEST_API_RATE = "100000/min"


def use_high_api_rates(settings) -> None:
    for name in ("API_THROTTLE_USER", "API_THROTTLE_ANON"):
        os.environ.setdefault(name, TEST_API_RATE)
        setattr(settings, name, os.environ[name])


def use_own_folders(config, settings, prefix: str) -> None:
    """Emulator state, trace files and uploads in a folder of this test process, not var/."""
    root = Path(tempfile.mkdtemp(prefix=f"{prefix}-"))
    config.add_cleanup(lambda: shutil.rmtree(root, ignore_errors=True))
    settings.EMULATOR_STATE_DIR = root / "emulator"
    settings.TRACE_STORAGE_DIR = root / "traces"
    settings.STORAGES["traces"]["OPTIONS"]["location"] = str(settings.TRACE_STORAGE_DIR)
    settings.MEDIA_ROOT = root / "media"
    settings.CELERY_BEAT_SCHEDULE_FILENAME = str(root / "celerybeat-schedule")
    settings.TRACE_STORAGE_FSYNC = False  # results still renamed into place whole; no wait on the disk


def scan_static_files_once() -> None:
    """WhiteNoise's middleware builds an entry (headers, compressed variants) for every static
    file, those the finders know (about 200, most of them drf-spectacular's) and those in
    STATIC_ROOT (400 more where `make run` collected them), each time it is made; and Django's
    test client makes it afresh for every client: 6 ms a client, 28 ms with STATIC_ROOT
    collected (about 5 s of CPU in a `make test-fast`). In this process the entries are made
    once (then 2.5 ms a client, listing STATIC_ROOT) and handed to the middlewares
    made after: the finders' files (the project's and the installed apps', which a test run
    does not change) once for each set of settings, STATIC_ROOT's again whenever a file in it
    is added, removed or changed (a `collectstatic` of another process). The middleware still
    serves, and tests still fetch, the real files."""
    from django.conf import settings
    from whitenoise.base import WhiteNoise, scantree
    from whitenoise.middleware import WhiteNoiseMiddleware

    made: dict[tuple, dict] = {}

    def once(self, key: tuple, build) -> None:
        key = (repr((
            settings.INSTALLED_APPS, settings.STATICFILES_DIRS, settings.STATICFILES_FINDERS, settings.DEBUG,
            self.static_prefix if isinstance(self, WhiteNoiseMiddleware) else None,
            {name: getattr(settings, name) for name in dir(settings) if name.startswith("WHITENOISE_")},
        )), *key)
        if key not in made:
            before = dict(self.files)
            build()
            made[key] = {url: entry for url, entry in self.files.items() if before.get(url) is not entry}
        self.files.update(made[key])

    from_finders, from_folder = WhiteNoiseMiddleware.add_files_from_finders, WhiteNoise.update_files_dictionary

    def add_files_from_finders(self):
        once(self, ("finders",), lambda: from_finders(self))

    def update_files_dictionary(self, root, prefix):
        files = tuple(sorted((path, stat.st_mtime_ns, stat.st_size) for path, stat in scantree(root)))
        once(self, (root, prefix, files), lambda: from_folder(self, root, prefix))

    WhiteNoiseMiddleware.add_files_from_finders = add_files_from_finders
    WhiteNoise.update_files_dictionary = update_files_dictionary


def flush_by_delete(settings) -> None:
    """After each transactional test Django empties every table; on PostgreSQL with one
    TRUNCATE of all of them, which makes each table's files anew and waits for the disk:
    0.1 s of the server's time a test on a quiet machine, up to a second on a busy one. The
    tables of a test hold a few rows, so DELETE empties them for a fraction of that (as
    Django does on SQLite); the foreign keys Django makes are checked at commit, when every
    table is empty. A flush that resets sequences or cascades is left to TRUNCATE."""
    if "postgresql" not in settings.DATABASES["default"]["ENGINE"]:
        return
    from django.db.backends.postgresql.operations import DatabaseOperations

    truncate = DatabaseOperations.sql_flush

    def sql_flush(self, style, tables, *, reset_sequences=False, allow_cascade=False):
        if reset_sequences or allow_cascade:
            return truncate(self, style, tables, reset_sequences=reset_sequences, allow_cascade=allow_cascade)
        return [f"{style.SQL_KEYWORD('DELETE FROM')} {style.SQL_FIELD(self.quote_name(table))};" for table in tables]

    DatabaseOperations.sql_flush = sql_flush


def load_hypothesis_profile(var_dir: Path) -> None:
    """Property tests: HYPOTHESIS_PROFILE=ci (make test, CI) tries every example a test asks
    for, `fast` (the default, make test-fast) a quarter (tests/support/examples.py). No
    deadline: a shared, loaded machine must not fail a test for being slow. The examples
    that failed are kept in var/hypothesis, not in the working tree (.hypothesis)."""
    from hypothesis import settings as hypothesis
    from hypothesis.configuration import set_hypothesis_home_dir
    from hypothesis.database import DirectoryBasedExampleDatabase

    set_hypothesis_home_dir(Path(var_dir) / "hypothesis")  # its caches (constants, unicode_data) too
    database = DirectoryBasedExampleDatabase(Path(var_dir) / "hypothesis" / "examples")
    hypothesis.register_profile("ci", max_examples=100, deadline=None, database=database)
    hypothesis.register_profile("fast", max_examples=25, deadline=None, database=database)
    hypothesis.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "fast"))


def pytest_collection_finish(session):
    """Move what collection left alive (modules, Django, numpy, torch) out of reach of the
    cyclic garbage collector, whose full collections then walk only what tests make: trace
    tests build hundreds of thousands of objects, and run about a tenth faster."""
    gc.collect()
    gc.freeze()


def pytest_collection_modifyitems(config, items):
    for item in items:
        tiers.classify(item)
    # The soak first, then the longest files: on several workers they then run beside the
    # others rather than after them (tests/support/tiers.py).
    tiers.longest_first(items)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """Let the process helpers know which test is running (tests/support/tiers.py)."""
    tiers.current_item = item
    item.stash[CHILDREN_BEFORE] = tiers.children()
    try:
        return (yield)
    finally:
        tiers.current_item = None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    """A unit test must not leave a child process running."""
    result = yield
    tiers.check_left_no_children(item.stash[CHILDREN_BEFORE])
    return result


@pytest.fixture(autouse=True)
def own_tsdb_labels(settings):
    """Every test writes and reads series of its own in the shared store (tests/support/tsdb.py)."""
    settings.TSDB_LABELS = unique_labels()
    settings.TSDB_BUFFER_DIR = settings.EMULATOR_STATE_DIR.parent / f"tsdb-buffer-{settings.TSDB_LABELS[-16:]}"
    yield settings.TSDB_LABELS
    shutil.rmtree(settings.TSDB_BUFFER_DIR, ignore_errors=True)


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
    from fleet.hosts import emulated_fleet

    for name, value in TEST_FLEET.items():
        setattr(settings, name, value)
    settings.EMULATOR_STATE_DIR = tmp_path / "emulator"
    emulated_fleet.host_monitor.cache_clear()
    yield settings
    emulated_fleet.host_monitor.cache_clear()


@pytest.fixture
def seeded_fleet(fleet_settings, clean_redis):
    from fleet.hosts.emulated_fleet import seed_fleet
    from fleet.models import Device

    seed_fleet()
    return list(Device.objects.for_dashboard())


@pytest.fixture
def gpu_fleet(settings, tmp_path, clean_redis):
    """A fleet of GPU-like devices only (tests.support.jobs.GPU_FLEET), seeded, for jobs."""
    from fleet.hosts import emulated_fleet
    from fleet.hosts.emulated_fleet import seed_fleet
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
    from fleet.polling import poller
    from tests.support.tsdb import flush

    for offset in (-2, -1, 0):
        for shard in poller.shards():
            poller.poll_shard(shard, POLLED_CYCLE + offset * 5.0)
    flush(newest=POLLED_CYCLE)  # the samples, readable from the store
    return seeded_fleet


@pytest.fixture(autouse=True, scope="session")
def few_password_iterations():
    """In this process Django's PBKDF2 hashes and checks at the iterations password_hash
    uses: a successful sign-in no longer upgrades the test user's hash at full cost (half a
    second of CPU each, by design), nor does the dummy hash of an unknown user name. The
    processes a test starts (a live Daphne) keep Django's own count."""
    from django.contrib.auth.hashers import PBKDF2PasswordHasher

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(PBKDF2PasswordHasher, "iterations", 1_000)
        yield


@functools.cache
def password_hash(password: str) -> str:
    """The stored form of `password`, made once per test process: Django's PBKDF2, at few
    iterations. A hash names its own iteration count, so every process (a live Daphne too)
    checks it with the same hasher, in a millisecond instead of the half second a sign-in
    costs by design; a successful sign-in upgrades it, as Django does with an old hash."""
    from django.contrib.auth.hashers import PBKDF2PasswordHasher

    hasher = PBKDF2PasswordHasher()
    return hasher.encode(password, hasher.salt(), iterations=1_000)


def _user(username: str, *groups: str):
    """A user whose password is "<username>-password-123" (browser tests sign in with it)."""
    from django.contrib.auth.models import Group, User

    from fleet.roles import ensure_roles

    ensure_roles()
    user = User.objects.create(username=username, password=password_hash(f"{username}-password-123"))
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
def admin_user(db):
    """pytest-django's superuser (password "password"), with the hash made once per process."""
    from django.contrib.auth.models import User

    return User.objects.create(username="admin", email="admin@example.com", is_staff=True, is_superuser=True,
                               password=password_hash("password"))


@pytest.fixture
def api_client():
    from rest_framework.test import APIClient

    return APIClient()


@pytest.fixture
async def close_thread_connections():
    """The sync_to_async thread of an async test keeps a database connection: close it, so
    that the test database can be dropped."""
    from asgiref.sync import sync_to_async
    from django.db import connections

    yield
    await sync_to_async(connections.close_all)()
