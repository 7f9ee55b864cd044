"""Start real Celery workers, beat and Daphne against the test database, and stop them."""

import ast
import atexit
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from functools import cache
from pathlib import Path

from django.conf import settings
from django.db import connection

from tests.support import tiers

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
SETTINGS_FILE = ROOT / "dashboard" / "settings.py"


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


# How a setting's value is written back as the variable settings.py reads it from, by the
# settings.py helper that reads it.
ENCODERS = {
    "env_str": str,
    "env_host_name": str,
    "env_int": str,
    "env_float": str,
    "env_bool": lambda value: "true" if value else "false",
    "env_list": ",".join,
    "env_paths": lambda value: ":".join(str(path) for path in value),
    "env_json_object": json.dumps,
    "env_rate": str,
}


@cache
def environment_settings() -> dict[str, tuple[str, Callable]]:
    """Every variable that dashboard/settings.py reads into a setting of its own:
    {variable: (setting, how to write the setting's value back as the variable)}."""
    found = {}
    for node in ast.walk(ast.parse(SETTINGS_FILE.read_text())):
        if not (isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name)):
            continue
        if isinstance(node.value, ast.Dict):  # a part of a structure, not a setting
            continue
        reads = [call for call in ast.walk(node.value)
                 if isinstance(call, ast.Call) and getattr(call.func, "id", None) in ENCODERS]
        if len(reads) == 1 and isinstance(reads[0].args[0], ast.Constant):
            found[reads[0].args[0].value] = (node.targets[0].id, ENCODERS[reads[0].func.id])
    return found


def child_env(**overrides) -> dict:
    """The environment of a child process: this one's, with every setting that comes from a
    variable as the running test has it (a setting the test changed reaches the child too),
    the test database, and `overrides` last."""
    env = dict(os.environ)
    for variable, (name, encode) in environment_settings().items():
        env[variable] = encode(getattr(settings, name))
    env.update(DATABASE_URL=test_database_url(), PYTHONUNBUFFERED="1")
    env.update({k: str(v) for k, v in overrides.items()})
    return env


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def descendants(pid: int) -> set[int]:
    """Every live process below `pid` (children, theirs, ...), read from /proc."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry.name))
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def kill_tree(proc: subprocess.Popen, timeout: float) -> None:
    """Stop a process started in a session of its own, and everything it started: SIGTERM to
    it, then, once it has ended or after `timeout` seconds, SIGKILL to its group, to each
    process below it and to the groups they lead (a stack runner's children have groups of
    their own; a worker's pool is in its worker's group)."""
    tree = set()
    if proc.poll() is None:
        tree = descendants(proc.pid)
        proc.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=timeout)
        tree |= descendants(proc.pid)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)  # its group, even when its leader has gone
    for pid in tree:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            if os.getpgid(pid) == pid:
                os.killpg(pid, signal.SIGKILL)
            os.kill(pid, signal.SIGKILL)
    proc.wait()


_running: set["Service"] = set()


@atexit.register
def stop_every_service() -> None:
    """Whatever a test did or failed to do, no service outlives the test process."""
    for service in list(_running):
        service.stop(timeout=5)


class Service:
    """A child process whose output is kept so a test can wait for a line or show it. It runs
    in a session of its own; stop() ends its whole process tree, and the test process stops
    every service still running when it exits."""

    def __init__(self, name: str, argv: list[str], env: dict, **popen):
        tiers.check_may_start(name)
        self.name = name
        self.lines: deque[str] = deque(maxlen=400)
        self.proc = subprocess.Popen(
            argv, cwd=popen.pop("cwd", ROOT), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True, bufsize=1, start_new_session=True, **popen,
        )
        _running.add(self)
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

    def stop(self, timeout: float = 15) -> None:
        """SIGTERM to its process group, SIGKILL to what is left of its tree after it ended
        or after `timeout` seconds."""
        kill_tree(self.proc, timeout)
        _running.discard(self)


def start_worker(env: dict, concurrency: int = 2, queue: str | None = None, node: str = "") -> Service:
    """A worker on the suite's queue, or on ``queue`` (e.g. the traces queue); ``node`` tells
    apart two workers of one queue (their node names must differ)."""
    queue = queue or env["CELERY_QUEUE"]
    worker = Service(
        "worker",
        [str(BIN / "celery"), "-A", "dashboard", "worker", "-l", "info", "-Q", queue,
         "--concurrency", str(concurrency), "--without-gossip", "--without-mingle",
         "-n", f"test-{queue}{node}-{os.getpid()}@%h"],
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
