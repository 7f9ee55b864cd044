"""The processes benchmarks start beside themselves, none of them through Django: a worker
script whose last line is JSON, a Redis server of their own, Celery workers, moto's S3
server, a VictoriaMetrics, and HTA's virtualenv."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import urllib.request
import venv
from collections.abc import Iterable, Sequence
from pathlib import Path

from .machine import BIN, HERE, ROOT

HTA_VENV = HERE / ".venv-hta"


def run_json(argv: Sequence[str | Path], timeout: float = 900, *, cwd: Path = ROOT) -> dict:
    """Runs a worker process and returns the JSON object of the last stdout line that starts
    with ``{``; ``{"error": ...}`` (the last line of its stderr, or the timeout) when it has
    none or failed."""
    try:
        proc = subprocess.run(
            [str(a) for a in argv], capture_output=True, text=True, timeout=timeout, cwd=cwd
        )
    except subprocess.TimeoutExpired:
        return {"error": f"timeout after {timeout:g}s"}
    lines = [x for x in proc.stdout.splitlines() if x.startswith("{")]
    if proc.returncode or not lines:
        return {"error": (proc.stderr.strip().splitlines() or ["failed"])[-1][:160]}
    return json.loads(lines[-1])


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_redis() -> tuple[subprocess.Popen, str]:
    """A redis-server of the benchmark's own on a free port (so other users of the shared
    Redis do not count in its figures), no persistence: the process and its URL."""
    port = free_port()
    server = subprocess.Popen(
        [
            shutil.which("redis-server") or "redis-server",
            "--port",
            str(port),
            "--save",
            "",
            "--appendonly",
            "no",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
    )
    deadline = time.time() + 10
    while time.time() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return server, f"redis://127.0.0.1:{port}/0"
        except OSError:
            time.sleep(0.05)
    server.kill()
    raise RuntimeError("redis-server did not start")


def start_celery(
    queue: str, name: str, env: dict[str, str], *, pool: str = "solo", concurrency: int = 1
) -> subprocess.Popen:
    """A Celery worker of the project on `queue` (node ``name-<pid>``), once it says it is
    ready; its output is drained meanwhile so it never blocks on a full pipe."""
    argv = [
        str(BIN / "celery"),
        "-A",
        "dashboard",
        "worker",
        "-l",
        "info",
        "-Q",
        queue,
        "--without-gossip",
        "--without-mingle",
        "-n",
        f"{name}-{os.getpid()}@%h",
        "--pool",
        pool,
    ]
    if pool != "solo":
        argv += ["--concurrency", str(concurrency)]
    proc = subprocess.Popen(
        argv,
        cwd=ROOT,
        env={**env, "PYTHONUNBUFFERED": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    for line in proc.stdout:
        if "ready." in line:
            break
    threading.Thread(target=_drain, args=(proc, name), daemon=True).start()
    return proc


def _drain(proc: subprocess.Popen, name: str) -> None:
    """Read a worker's output to its end; kept in BENCH_WORKER_LOGS/<name>.log when that
    folder is set (to see where a figure's time went)."""
    folder = os.environ.get("BENCH_WORKER_LOGS")
    if not folder:
        for _ in proc.stdout:
            pass
        return
    Path(folder).mkdir(parents=True, exist_ok=True)
    with (Path(folder) / f"{name}.log").open("a") as log:
        for line in proc.stdout:
            log.write(line)


def stop_all(procs: Iterable[subprocess.Popen], timeout: float = 60) -> None:
    """Terminates every process, then waits for each."""
    procs = list(procs)
    for p in procs:
        p.terminate()
    for p in procs:
        p.wait(timeout=timeout)


# moto's S3 server, for runs with the traces in an object store
CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "bench",
    "AWS_SECRET_ACCESS_KEY": "bench-secret",
    "AWS_DEFAULT_REGION": "us-east-1",
}


def start_moto(port: int) -> subprocess.Popen:
    proc = subprocess.Popen(
        [str(BIN / "moto_server"), "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, **CREDENTIALS},
    )
    for _ in range(100):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/moto-api/", timeout=1).close()
            return proc
        except OSError:
            time.sleep(0.1)
    raise RuntimeError("moto_server did not start")


def hta_python() -> Path:
    """The Python of HTA's own virtualenv (benchmarks/.venv-hta: holistictraceanalysis 0.5.0,
    pandas<3), made on first use; HTA is never a dependency of the project."""
    python = HTA_VENV / "bin" / "python"
    if not python.exists():
        print("creating the HTA virtualenv (holistictraceanalysis 0.5.0, pandas<3) ...", flush=True)
        venv.create(HTA_VENV, with_pip=True)
        subprocess.run(
            [str(python), "-m", "pip", "install", "-q", "holistictraceanalysis==0.5.0", "pandas<3"],
            check=True,
        )
    return python


class VictoriaMetrics:
    """A VictoriaMetrics as `make run` starts it, in a folder of its own (kept when given)."""

    def __init__(self, folder: Path | None = None):
        from dashboard.backing_services import tsdb_answers, victoria_metrics_argv

        self.kept = folder is not None
        self.folder = folder or Path(tempfile.mkdtemp(prefix="asicmon-bench-vm-"))
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        self.proc = subprocess.Popen(
            victoria_metrics_argv(self.folder / "data", port, 40),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.STDOUT,
        )
        while not tsdb_answers(self.url):
            time.sleep(0.1)

    def get(self, path: str) -> None:
        with urllib.request.urlopen(self.url + path, timeout=600) as answer:
            answer.read()

    def size(self) -> int:
        return sum(f.stat().st_size for f in (self.folder / "data").rglob("*") if f.is_file())

    def settle(self) -> int:
        """Flush, merge every partition, and wait until the folder stops changing: its size."""
        self.get("/internal/force_flush")
        self.get("/internal/force_merge")
        last, stable = -1, 0
        while stable < 5:
            time.sleep(2)
            size = self.size()
            stable = stable + 1 if size == last else 0
            last = size
        return last

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(60)
        if not self.kept:
            shutil.rmtree(self.folder, ignore_errors=True)
