"""The web process cannot exhaust PostgreSQL's connections, however many requests run at once.

Reproduces issue 12's first defect: with persistent per-thread connections, 20 concurrent
API calls to Daphne held more connections than the server allows and some got 500.
"""

import threading
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.db import connection

from tests.support.needs import needs_postgres
from tests.support.processes import child_env, start_web

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

POOL_MAX = 3


APP_NAME = "asicmon-web-under-test"


def web_connections() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name = %s", [APP_NAME])
        return cursor.fetchone()[0]


def test_concurrent_api_calls_never_hold_more_connections_than_the_pool(seeded_fleet, viewer):
    needs_postgres("connection pooling (a PostgreSQL setting)")
    from rest_framework.authtoken.models import Token

    token = Token.objects.create(user=viewer).key
    web, base = start_web(child_env(DB_POOL_MAX_SIZE=POOL_MAX, DB_POOL_MIN_SIZE=0, PGAPPNAME=APP_NAME))
    peak = 0
    stop = threading.Event()

    def watch():
        nonlocal peak
        from django.db import connections

        while not stop.is_set():
            peak = max(peak, web_connections())
            stop.wait(0.02)
        connections.close_all()

    def call(_):
        request = urllib.request.Request(f"{base}/api/devices/", headers={"Authorization": f"Token {token}"})
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                return response.status
        except urllib.error.HTTPError as exc:
            return exc.code

    watcher = threading.Thread(target=watch)
    try:
        watcher.start()
        with ThreadPoolExecutor(max_workers=20) as pool:
            statuses = list(pool.map(call, range(200)))
    finally:
        stop.set()
        watcher.join()
        web.stop()
    assert statuses.count(200) == 200, {s: statuses.count(s) for s in set(statuses)}
    assert 1 <= peak <= POOL_MAX, f"the web process held {peak} connections; its pool allows {POOL_MAX}"
