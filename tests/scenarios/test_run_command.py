"""The README's run command, really run: migrate, seed, worker, beat and web, then Ctrl-C;
with passwords in every URL it is given, none of which it prints."""

import http.cookiejar
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

import pytest
from django.db import connection

from tests.support.needs import in_ci
from tests.support.processes import Service, free_port

pytestmark = pytest.mark.integration


class Browser:
    """Just enough of a browser: cookies, CSRF, form posts."""

    def __init__(self, base: str):
        self.base = base
        self.jar = http.cookiejar.CookieJar()
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.jar))

    def get(self, path: str) -> tuple[int, str]:
        with self.opener.open(self.base + path, timeout=10) as response:
            return response.status, response.read().decode()

    def sign_in(self, username: str, password: str) -> str:
        _, page = self.get("/accounts/login/")
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)
        data = urllib.parse.urlencode(
            {"csrfmiddlewaretoken": token, "username": username, "password": password, "next": "/"}
        ).encode()
        request = urllib.request.Request(
            self.base + "/accounts/login/", data=data, headers={"Referer": self.base + "/accounts/login/"}
        )
        with self.opener.open(request, timeout=10) as response:
            return response.geturl()


@pytest.fixture
def locked_redis():
    """A Redis of the test's own that wants a password, and a second user for the broker:
    (REDIS_URL, CELERY_BROKER_URL, their passwords)."""
    server = shutil.which("redis-server")
    if server is None:
        pytest.fail("redis-server is needed (apt-get install redis-server)")
    port = free_port()
    passwords = {"redis": f"redis-pw-{secrets.token_hex(6)}", "broker": f"broker-pw-{secrets.token_hex(6)}"}
    redis = Service("redis", [server, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                              "--requirepass", passwords["redis"],
                              "--user", "broker", "on", f">{passwords['broker']}", "~*", "&*", "+@all"], dict(os.environ))
    try:
        redis.wait_for_line("Ready to accept connections", timeout=30)
        yield (f"redis://:{passwords['redis']}@127.0.0.1:{port}/0",
               f"redis://broker:{passwords['broker']}@127.0.0.1:{port}/1", list(passwords.values()))
    finally:
        redis.stop()


@pytest.fixture
def database_with_password(tmp_path):
    """The suite's PostgreSQL, as a URL with a password (the server's own when it has one;
    any under trust authentication), naming a database the runner creates: (URL, password).
    On SQLite (no PostgreSQL configured) a file, and no password to look for (under CI, where
    PostgreSQL must be configured, a failure)."""
    if connection.vendor != "postgresql":
        if in_ci():
            pytest.fail("CI=true but the suite runs on SQLite: the PostgreSQL password is not checked")
        yield f"sqlite:///{tmp_path / 'db.sqlite3'}", None
        return
    import psycopg

    db = connection.settings_dict
    password = db.get("PASSWORD") or f"pg-pw-{secrets.token_hex(6)}"
    user, host, port = db.get("USER") or "postgres", db.get("HOST") or "127.0.0.1", db.get("PORT") or 5432
    name = f"asicmon_runtest_{os.getpid()}"
    yield f"postgres://{user}:{password}@{host}:{port}/{name}", password
    with psycopg.connect(host=host, port=port, user=user, password=password, dbname="postgres",
                         autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_run_command_serves_a_live_fleet_and_stops_everything_on_ctrl_c(tmp_path, locked_redis, database_with_password):
    port = free_port()
    names = f"asicmon-runtest-{os.getpid()}"
    redis_url, broker_url, passwords = locked_redis
    database_url, database_password = database_with_password
    env = dict(
        os.environ,
        ASICMON_VAR_DIR=str(tmp_path),
        DATABASE_URL=database_url,
        REDIS_URL=redis_url,
        CELERY_BROKER_URL=broker_url,
        REDIS_KEY_PREFIX=names,
        CELERY_QUEUE=names,
        ASICMON_ADMIN_PASSWORD="run-test-password-1",
        WEB_PORT=str(port),
        POLL_INTERVAL="1",
        PYTHONUNBUFFERED="1",
    )
    env.pop("EMULATOR_STATE_DIR", None)
    started = time.time()
    runner = Service("stack", [sys.executable, "-m", "dashboard.stack", "run"], env)
    pages = []
    try:
        runner.wait_for_line("Asicmon is starting", timeout=90)
        browser = Browser(f"http://127.0.0.1:{port}")
        deadline = time.time() + 60
        while True:
            try:
                assert browser.get("/accounts/login/")[0] == 200
                break
            except OSError:
                if time.time() > deadline:
                    raise
                time.sleep(0.3)
        assert browser.sign_in("admin", "run-test-password-1").endswith("/")
        status, fleet_page = browser.get("/")
        assert status == 200 and fleet_page.count("data-device-id=") == 32
        pages.append(fleet_page)

        def polled():
            devices = json.loads(browser.get("/api/devices/")[1])
            return devices if all(d["latest"] for d in devices["results"]) else None

        while not (devices := polled()):
            assert time.time() < deadline, runner.output()
            time.sleep(0.5)
        pages.append(json.dumps(devices))
        try:
            browser.get("/no-such-page/")
        except urllib.error.HTTPError as missing:
            pages.append(missing.read().decode())
        assert devices["count"] == 32
        assert len({d["type"] for d in devices["results"]}) == 3
        assert time.time() - started < 90
        assert "Created 'admin' with the password from ASICMON_ADMIN_PASSWORD" in runner.output()

        # kill -9 of the worker: the runner restarts it, the web server keeps answering,
        # and polling carries on.
        worker_pid = int(subprocess.run(
            ["pgrep", "-P", str(runner.proc.pid), "-f", "celery.* worker "], capture_output=True, text=True
        ).stdout.split()[0])
        os.kill(worker_pid, signal.SIGKILL)
        runner.wait_for_line("worker restarted", timeout=30)
        assert "worker exited with status -9" in runner.output()
        assert browser.get("/accounts/login/")[0] == 200
        seen = {d["id"]: d["latest"]["sample_ts"] for d in devices["results"]}
        deadline = time.time() + 60
        while not all(d["latest"]["sample_ts"] > seen[d["id"]] for d in (polled() or devices)["results"]):
            assert time.time() < deadline, runner.output()
            time.sleep(0.5)
    finally:
        runner.proc.send_signal(signal.SIGINT)
        try:
            runner.proc.wait(timeout=15)
        finally:
            runner.stop(timeout=0)  # whatever happened, nothing it started outlives the test

    leftovers = subprocess.run(
        ["pgrep", "-f", f"(-p {port} |{tmp_path}|-Q {names})"], capture_output=True, text=True
    ).stdout.split()
    assert leftovers == [], runner.output()
    assert "stopping" in runner.output()
    # No password it was given is printed, nor shown on a page.
    said = runner.output() + "\n".join(pages)
    for password in [*passwords, database_password, "run-test-password-1"]:
        if password:
            assert password not in said, [line for line in said.splitlines() if password in line]
    assert redis_url.replace(passwords[0], "***") in runner.output()
    assert broker_url.replace(passwords[1], "***") in runner.output()
