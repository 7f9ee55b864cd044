"""The README's run command, really run: migrate, seed, worker, beat and web, then Ctrl-C."""

import http.cookiejar
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.parse
import urllib.request

import pytest
from django.conf import settings

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


def test_run_command_serves_a_live_fleet_and_stops_everything_on_ctrl_c(tmp_path):
    port = free_port()
    names = f"asicmon-runtest-{os.getpid()}"  # apart from other suites on the same Redis
    env = dict(
        os.environ,
        ASICMON_VAR_DIR=str(tmp_path),
        DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite3'}",
        REDIS_URL=settings.REDIS_URL,
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

        def polled():
            devices = json.loads(browser.get("/api/devices/")[1])
            return devices if all(d["latest"] for d in devices["results"]) else None

        while not (devices := polled()):
            assert time.time() < deadline, runner.output()
            time.sleep(0.5)
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
        runner.proc.wait(timeout=30)

        from fleet.redis import get_redis

        client = get_redis()
        for key in client.scan_iter(f"{names}:*"):
            client.delete(key)

    leftovers = subprocess.run(
        ["pgrep", "-f", f"(-p {port} |{tmp_path}|-Q {names})"], capture_output=True, text=True
    ).stdout.split()
    assert leftovers == [], runner.output()
    assert "stopping" in runner.output()
