"""Start real Celery workers, beat and Daphne against the test database, and stop them."""

import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections import deque
from pathlib import Path

from django.conf import settings
from django.db import connection

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def test_database_url() -> str:
    """The URL of the database the tests are using right now (the test_ one)."""
    db = connection.settings_dict
    if db["ENGINE"].endswith("sqlite3"):
        return f"sqlite:///{db['NAME']}"
    user = db.get("USER") or "postgres"
    password = f":{db['PASSWORD']}" if db.get("PASSWORD") else ""
    host = db.get("HOST") or "127.0.0.1"
    port = db.get("PORT") or 5432
    return f"postgres://{user}{password}@{host}:{port}/{db['NAME']}"


def child_env(**overrides) -> dict:
    env = dict(os.environ)
    env.update(
        DATABASE_URL=test_database_url(),
        REDIS_URL=settings.REDIS_URL,
        REDIS_KEY_PREFIX=settings.REDIS_KEY_PREFIX,
        CELERY_QUEUE=settings.CELERY_TASK_DEFAULT_QUEUE,
        FLEET_SEED=str(settings.FLEET_SEED),
        FLEET_HOSTS=str(settings.FLEET_HOSTS),
        FLEET_DEVICES_PER_HOST=str(settings.FLEET_DEVICES_PER_HOST),
        FLEET_TYPES=",".join(settings.FLEET_TYPES),
        EMULATOR_STATE_DIR=str(settings.EMULATOR_STATE_DIR),
        POLL_INTERVAL=str(settings.POLL_INTERVAL),
        POLL_SHARDS=str(settings.POLL_SHARDS),
        EMULATOR_REBOOT_S=str(settings.EMULATOR_REBOOT_S),
        REMEDIATION_DRY_RUN=str(settings.REMEDIATION_DRY_RUN),
        REMEDIATION_MAX_ACTIVE=str(settings.REMEDIATION_MAX_ACTIVE),
        REMEDIATION_MAX_PER_HOST=str(settings.REMEDIATION_MAX_PER_HOST),
        REMEDIATION_PAUSE_CRITICAL=str(settings.REMEDIATION_PAUSE_CRITICAL),
        REMEDIATION_MAX_REBOOTS=str(settings.REMEDIATION_MAX_REBOOTS),
        REMEDIATION_REBOOT_TIMEOUT_S=str(settings.REMEDIATION_REBOOT_TIMEOUT_S),
        HEALTH_LIMITS=json.dumps(settings.HEALTH_LIMITS),
        PYTHONUNBUFFERED="1",
    )
    env.update({k: str(v) for k, v in overrides.items()})
    return env


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Service:
    """A child process whose output is kept so a test can wait for a line or show it."""

    def __init__(self, name: str, argv: list[str], env: dict):
        self.name = name
        self.lines: deque[str] = deque(maxlen=400)
        self.proc = subprocess.Popen(
            argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True, bufsize=1, start_new_session=True,
        )
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.append(line.rstrip())

    def output(self) -> str:
        return "\n".join(self.lines)

    def wait_for_line(self, text: str, timeout: float = 60) -> None:
        deadline = time.time() + timeout
        while time.time() < deadline:
            if any(text in line for line in list(self.lines)):
                return
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited ({self.proc.returncode}):\n{self.output()}")
            time.sleep(0.1)
        raise TimeoutError(f"{self.name} never printed {text!r}:\n{self.output()}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def start_worker(env: dict, concurrency: int = 2, queue: str | None = None) -> Service:
    """A worker on the suite's queue, or on ``queue`` (e.g. the traces queue)."""
    queue = queue or env["CELERY_QUEUE"]
    worker = Service(
        "worker",
        [str(BIN / "celery"), "-A", "dashboard", "worker", "-l", "info", "-Q", queue,
         "--concurrency", str(concurrency), "--without-gossip", "--without-mingle",
         "-n", f"test-{queue}-{os.getpid()}@%h"],
        env,
    )
    worker.wait_for_line("ready.")
    return worker


def start_beat(env: dict, schedule: Path) -> Service:
    beat = Service(
        "beat",
        [str(BIN / "celery"), "-A", "dashboard", "beat", "-l", "info", "-s", str(schedule)],
        env,
    )
    beat.wait_for_line("beat: Starting")
    return beat


def start_web(env: dict, port: int | None = None) -> tuple[Service, str]:
    port = port or free_port()
    web = Service("web", [str(BIN / "daphne"), "-b", "127.0.0.1", "-p", str(port), "dashboard.asgi:application"], env)
    deadline = time.time() + 30
    while time.time() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return web, f"http://127.0.0.1:{port}"
        except OSError:
            if web.proc.poll() is not None:
                raise RuntimeError(f"daphne exited:\n{web.output()}") from None
            time.sleep(0.1)
    raise TimeoutError(f"daphne did not listen on {port}:\n{web.output()}")
