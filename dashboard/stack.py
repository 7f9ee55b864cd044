"""Start the whole stack, or the test suite, on whatever services this machine has.

    python -m dashboard.stack run    # migrate, seed, then worker + beat + web, Ctrl-C stops all
    python -m dashboard.stack test   # pytest against PostgreSQL/Redis if they answer, else fallbacks
    python -m dashboard.stack test --tiers=unit,stack   # the same, one run per tier

Plain Python: it runs before Django is configured, and decides what Django is given.
"""

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

ROOT = Path(__file__).resolve().parent.parent
VAR = Path(os.environ.get("ASICMON_VAR_DIR", ROOT / "var"))
DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"
DEFAULT_TSDB_URL = "http://127.0.0.1:8428"
COLOURS = ["\033[36m", "\033[35m", "\033[33m", "\033[32m", "\033[34m"]
RESET = "\033[0m"


def say(message: str) -> None:
    print(f"\033[1m[asicmon]\033[0m {message}", flush=True)


# --- Services ----------------------------------------------------------------------


def redis_answers(url: str) -> bool:
    import redis

    try:
        return bool(redis.Redis.from_url(url, socket_connect_timeout=1, socket_timeout=1).ping())
    except (redis.RedisError, OSError, ValueError):
        return False


def postgres_answers(url: str) -> bool:
    import psycopg

    parts = urlparse(url)
    try:
        with psycopg.connect(_postgres_dsn(parts, "postgres"), connect_timeout=2):
            return True
    except psycopg.Error:
        return False


def _postgres_dsn(parts, dbname: str) -> str:
    """Connection string for another database on the server a PostgreSQL URL names."""
    from psycopg.conninfo import make_conninfo

    options = {"host": parts.hostname or "127.0.0.1", "port": parts.port or 5432,
               "user": parts.username or "postgres", "dbname": dbname}
    if parts.password:
        options["password"] = parts.password
    return make_conninfo(**options)


def ensure_postgres_database(url: str) -> None:
    """Create the database named in a PostgreSQL URL if it does not exist yet."""
    import psycopg
    from psycopg import sql

    parts = urlparse(url)
    name = parts.path.lstrip("/") or "asicmon"
    with psycopg.connect(_postgres_dsn(parts, "postgres"), autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone()
        if not exists:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
            say(f"created PostgreSQL database {name}")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_throwaway_redis() -> tuple[subprocess.Popen, str]:
    server = shutil.which("redis-server")
    if server is None:
        sys.exit("No Redis answers at REDIS_URL and redis-server is not installed (apt-get install redis-server).")
    port = free_port()
    proc = subprocess.Popen(
        [server, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
    )
    url = f"redis://127.0.0.1:{port}/0"
    for _ in range(100):
        if redis_answers(url):
            return proc, url
        time.sleep(0.05)
    proc.kill()
    sys.exit(f"redis-server did not start on port {port}")


def tsdb_answers(url: str) -> bool:
    """Whether a Prometheus-compatible store answers PromQL at `url`."""
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(f"{url.rstrip('/')}/api/v1/query?query=1", timeout=1) as answer:
            return answer.status == 200
    except (urllib.error.URLError, OSError, ValueError):
        return False


def victoria_metrics_argv(data_dir: Path, port: int, retention_days: int) -> list[str]:
    """VictoriaMetrics for Asicmon: a sample is readable as soon as it is written (no latency
    offset; the tests flush), a sample written twice (the same timestamp) is kept once."""
    server = shutil.which("victoria-metrics")
    if server is None:
        sys.exit("No store answers at TSDB_URL and victoria-metrics is not installed "
                 "(apt-get install victoria-metrics, or `make run`, which installs it).")
    return [
        server,
        f"-storageDataPath={data_dir}",
        f"-httpListenAddr=127.0.0.1:{port}",
        f"-retentionPeriod={retention_days}d",
        "-search.latencyOffset=0s",
        "-dedup.minScrapeInterval=1ms",
        "-memory.allowedPercent=20",
        "-loggerLevel=WARN",
    ]


def start_victoria_metrics(data_dir: Path, port: int, retention_days: int) -> tuple[subprocess.Popen, str]:
    """Start VictoriaMetrics on `port` with its data in `data_dir` (its log beside it)."""
    data_dir.mkdir(parents=True, exist_ok=True)
    with (data_dir.parent / f"{data_dir.name}.log").open("ab") as log:
        proc = subprocess.Popen(
            victoria_metrics_argv(data_dir, port, retention_days), stdout=log, stderr=subprocess.STDOUT,
            preexec_fn=_detach_and_die_with_parent,
        )
    url = f"http://127.0.0.1:{port}"
    for _ in range(200):
        if tsdb_answers(url):
            return proc, url
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    proc.kill()
    sys.exit(f"victoria-metrics did not start on port {port}: see {data_dir.parent / f'{data_dir.name}.log'}")


def vmalert_argv(rules: Path, read_url: str, write_url: str, interval_s: float, port: int) -> list[str] | None:
    """vmalert recording the fleet's aggregates (fleet.tsdb.series.RECORDED) into the store;
    None if it is not installed (Debian's victoria-metrics package ships it)."""
    server = shutil.which("vmalert")
    if server is None:
        return None
    write = write_url.rstrip("/")
    path_given = write.endswith(("/api/v1/write", "/api/v1/push"))
    return [
        server, f"-rule={rules}", f"-datasource.url={read_url}", f"-remoteWrite.url={write}",
        *(["-remoteWrite.disablePathAppend"] if path_given else []),
        # Each evaluation sees every device's latest sample of the last two poll slots (a
        # cycle written a little late still counts; a device gone for longer does not).
        f"-evaluationInterval={interval_s:g}s", f"-datasource.queryStep={2 * interval_s:g}s",
        f"-remoteWrite.flushInterval={interval_s:g}s",
        f"-httpListenAddr=127.0.0.1:{port}", "-loggerLevel=WARN",
    ]


def start_vmalert(env: dict, folder: Path) -> list[subprocess.Popen]:
    """Start vmalert beside the store the stack started, its rules made for TSDB_LABELS."""
    from fleet.tsdb.series import recording_rules

    rules = folder / "tsdb-rules.yml"
    rules.write_text(recording_rules(env.get("TSDB_LABELS", "")))
    argv = vmalert_argv(rules, env["TSDB_URL"], env["TSDB_WRITE_URL"], float(env.get("POLL_INTERVAL") or 5), free_port())
    if argv is None:
        say("vmalert is not installed: the fleet-wide aggregates are not recorded")
        return []
    with (folder / "vmalert.log").open("ab") as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, preexec_fn=_detach_and_die_with_parent)
    say(f"vmalert records the fleet-wide aggregates ({rules})")
    return [proc]


def _local_port(url: str) -> int | None:
    """The port of a URL on this machine that nothing listens on yet, else None."""
    parts = urlparse(url)
    if parts.hostname not in {"127.0.0.1", "localhost"}:
        return None
    port = parts.port or 80
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return None
    return port


def resolve_tsdb(env: dict, data_dir: Path) -> list[subprocess.Popen]:
    """Point env at a time-series store that answers, starting VictoriaMetrics with its data
    in `data_dir` when none does (on TSDB_URL's port when that is a free local one)."""
    url = env.get("TSDB_URL") or DEFAULT_TSDB_URL
    if tsdb_answers(url):
        say(f"Time-series store: {url}" + (f", writes to {env['TSDB_WRITE_URL']}" if env.get("TSDB_WRITE_URL") else ""))
        return []
    retention = env.get("SAMPLE_RETENTION_DAYS") or "30"
    if not retention.isdigit() or int(retention) < 1:
        sys.exit(f"SAMPLE_RETENTION_DAYS={retention!r} is not a number of days")
    port = _local_port(url) or free_port()
    proc, env["TSDB_URL"] = start_victoria_metrics(data_dir, port, int(retention))
    if not env.get("TSDB_WRITE_URL") or env["TSDB_WRITE_URL"].rstrip("/") == url.rstrip("/"):
        env["TSDB_WRITE_URL"] = env["TSDB_URL"]
    say(f"Time-series store: nothing answered at {url}, started VictoriaMetrics at {env['TSDB_URL']} "
        f"(data in {data_dir}, kept {retention} days)")
    return [proc]


def resolve_services(env: dict) -> list[subprocess.Popen]:
    """Point env at a Redis and a database that answer; returns processes we started."""
    started = []
    redis_url = env.get("REDIS_URL") or DEFAULT_REDIS_URL
    if redis_answers(redis_url):
        say(f"Redis: {redis_url}")
    else:
        proc, redis_url = start_throwaway_redis()
        started.append(proc)
        say(f"Redis: nothing answered, started a throwaway redis-server at {redis_url}")
    env["REDIS_URL"] = redis_url

    database_url = env.get("DATABASE_URL", "")
    if database_url.startswith(("postgres://", "postgresql://")):
        if postgres_answers(database_url):
            say(f"Database: PostgreSQL {database_url}")
        else:
            say(f"Database: PostgreSQL at {database_url} does not answer; falling back to SQLite")
            env.pop("DATABASE_URL")
    if not env.get("DATABASE_URL"):
        say(f"Database: SQLite {VAR / 'db.sqlite3'}")
    broker = env.get("CELERY_BROKER_URL")
    say(f"Broker: {broker}" if broker else "Broker: Redis (set CELERY_BROKER_URL=amqp://… for RabbitMQ)")
    return started


# --- Processes ---------------------------------------------------------------------


def _detach_and_die_with_parent() -> None:
    """In the child: own process group (Ctrl-C reaches only us), and die if we die."""
    os.setsid()
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)


def _interrupt(signum, frame):
    raise KeyboardInterrupt


@dataclass
class Child:
    """One supervised process: what to run, and how its restarts are going."""

    name: str
    argv: list[str]
    colour: str
    proc: subprocess.Popen | None = None
    started_at: float = 0.0
    quick_exits: int = 0
    restart_at: float | None = None


class Supervisor:
    """Runs named processes with interleaved, prefixed output.

    A process that exits is logged and started again after a back-off (1 s, doubling up
    to 30 s; a run longer than a minute starts the back-off afresh). Only Ctrl-C (or
    SIGTERM/SIGHUP to the runner) stops the stack, and then it stops every process.
    """

    FIRST_BACKOFF = 1.0
    MAX_BACKOFF = 30.0
    STABLE_AFTER = 60.0

    def __init__(self, env: dict):
        self.env = env
        self.children: list[Child] = []
        self.width = 6

    def start(self, name: str, argv: list[str]) -> None:
        child = Child(name, argv, COLOURS[len(self.children) % len(COLOURS)])
        self.children.append(child)
        self.width = max(self.width, len(name))
        self._spawn(child)

    def _spawn(self, child: Child) -> None:
        child.proc = subprocess.Popen(
            child.argv, cwd=ROOT, env=self.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True, bufsize=1, preexec_fn=_detach_and_die_with_parent,
        )
        child.started_at = time.monotonic()
        child.restart_at = None
        threading.Thread(target=self._pump, args=(child, child.proc), daemon=True).start()

    def _pump(self, child: Child, proc: subprocess.Popen) -> None:
        tty = sys.stdout.isatty()
        name = f"{child.name:<{self.width}}|"
        prefix = f"{child.colour}{name}{RESET} " if tty else f"{name} "
        for line in proc.stdout:
            sys.stdout.write(prefix + line)
            sys.stdout.flush()

    def supervise_once(self, now: float) -> None:
        """Notice exited processes and restart those whose back-off has passed."""
        for child in self.children:
            if child.proc.poll() is None:
                continue
            if child.restart_at is None:
                _kill_group(child.proc.pid)  # what it left behind (a worker's pool processes)
                ran = now - child.started_at
                child.quick_exits = 0 if ran >= self.STABLE_AFTER else child.quick_exits + 1
                delay = min(self.MAX_BACKOFF, self.FIRST_BACKOFF * 2 ** max(0, child.quick_exits - 1))
                child.restart_at = now + delay
                say(f"{child.name} exited with status {child.proc.returncode} after {ran:.1f} s; "
                    f"restarting it in {delay:.0f} s")
            elif now >= child.restart_at:
                self._spawn(child)
                say(f"{child.name} restarted (pid {child.proc.pid})")

    def wait(self) -> int:
        """Supervise until interrupted; then stop every process."""
        signal.signal(signal.SIGTERM, _interrupt)
        signal.signal(signal.SIGHUP, _interrupt)
        try:
            while True:
                self.supervise_once(time.monotonic())
                time.sleep(0.3)
        except KeyboardInterrupt:
            say("stopping…")
            return 0
        finally:
            self.stop()

    def stop(self) -> None:
        running = [c.proc for c in self.children if c.proc is not None and c.proc.poll() is None]
        for proc in running:
            os.killpg(proc.pid, signal.SIGTERM)
        deadline = time.time() + 10
        for proc in running:
            try:
                proc.wait(timeout=max(0.1, deadline - time.time()))
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)


def manage(env: dict, *args: str) -> None:
    subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=env, check=True)


def processes(env: dict, host: str, port: str) -> list[tuple[str, list[str]]]:
    """The stack's long-running processes, by name: add one here to have it supervised."""
    bin_dir = Path(sys.executable).parent
    celery = str(bin_dir / "celery")
    return [
        ("worker", [celery, "-A", "dashboard", "worker", "-l", "info",
                    "--concurrency", env.get("WORKER_CONCURRENCY", "2"),
                    "-Q", env.get("CELERY_QUEUE", "asicmon")]),
        # Captures and analyses: their own queue and process, so polling never waits behind them.
        ("traces", [celery, "-A", "dashboard", "worker", "-l", "info",
                    "--concurrency", env.get("TRACE_WORKER_CONCURRENCY", "3"),
                    "-Q", env.get("CELERY_QUEUE", "asicmon") + ".traces", "-n", "traces@%h"]),
        ("beat", [celery, "-A", "dashboard", "beat", "-l", "info", "-s", str(VAR / "celerybeat-schedule")]),
        ("web", [str(bin_dir / "daphne"), "-b", host, "-p", port, "dashboard.asgi:application"]),
    ]


def run() -> int:
    env = dict(os.environ)
    env.setdefault("PYTHONUNBUFFERED", "1")
    VAR.mkdir(parents=True, exist_ok=True)
    helpers = resolve_services(env)
    started_store = resolve_tsdb(env, VAR / "tsdb")
    helpers += started_store
    if started_store:
        helpers += start_vmalert(env, VAR)
    if env.get("DATABASE_URL", "").startswith(("postgres://", "postgresql://")):
        ensure_postgres_database(env["DATABASE_URL"])
    try:
        manage(env, "migrate", "--no-input", "-v", "0")
        manage(env, "seed_fleet")
        manage(env, "ensure_admin")
        manage(env, "collectstatic", "--no-input", "-v", "0")
        host = env.get("WEB_HOST", "127.0.0.1")
        port = env.get("WEB_PORT", "8000")
        supervisor = Supervisor(env)
        for name, argv in processes(env, host, port):
            supervisor.start(name, argv)
        say(f"Asicmon is starting: open http://{host}:{port}/ and sign in (see the administrator line above).")
        say("Press Ctrl-C to stop the worker, beat and web server.")
        return supervisor.wait()
    finally:
        stop(helpers)


# The suite's tiers (tests/support/tiers.py sorts the tests): `make test-fast` runs the
# first, `make test` all of them, one after the other. The unit tier runs in parallel; the
# process and browser tiers on few workers, a test module (and the stack it shares) on one.
# In the stack tier a test file runs on one worker, so that the stack its tests share starts
# once. The unit tier starts each worker on a run of consecutive tests (a module's fixtures
# are mostly made once) and lets idle workers take over the rest ("worksteal"; per-file
# scheduling would run schemathesis's generated API tests, which share one id, only once).
UNIT_TESTS = "not integration and not browser and not soak"
TIERS = {
    "unit": ["-m", UNIT_TESTS, "-n", os.environ.get("TEST_WORKERS", "4"), "--dist", "worksteal"],
    "stack": ["-m", f"not ({UNIT_TESTS})", "-n", "2", "--dist", "loadfile"],
}
NO_TESTS_COLLECTED = 5  # pytest's exit status when a selection is empty


def test(pytest_args: list[str], tiers: list[str] | None = None) -> int:
    """Run pytest once with `pytest_args`, or once per tier (the arguments added to each)."""
    env = dict(os.environ)
    env.setdefault("PYTHONUNBUFFERED", "1")
    # Keep tests apart from a running dashboard on the same Redis.
    env["REDIS_KEY_PREFIX"] = "asicmon-test"
    env["CELERY_QUEUE"] = "asicmon-test"
    # Where PYTHONDONTWRITEBYTECODE keeps compiled modules out of the source tree, keep them in
    # var/pycache instead: else every xdist worker, and every process a test starts, compiles
    # the project and pytest rewrites every test module afresh (half of a worker's start).
    if env.pop("PYTHONDONTWRITEBYTECODE", None):
        env.setdefault("PYTHONPYCACHEPREFIX", str(VAR / "pycache"))
    VAR.mkdir(parents=True, exist_ok=True)
    helpers = resolve_services(env)
    # A throwaway store under var/, emptied afterwards (tests keep apart by TSDB_LABELS).
    tsdb_dir = VAR / f"tsdb-test-{os.getpid()}"
    helpers += resolve_tsdb(env, tsdb_dir)
    try:
        if not tiers:
            return _pytest(pytest_args, env)
        statuses = []
        for tier in tiers:
            say(f"{tier} tests: pytest {' '.join(TIERS[tier])}")
            statuses.append(_pytest([*TIERS[tier], *pytest_args], env))
            if statuses[-1] == NO_TESTS_COLLECTED:
                say(f"no {tier} tests in this selection")
        failed = [s for s in statuses if s != NO_TESTS_COLLECTED]
        return max(failed, default=NO_TESTS_COLLECTED)
    finally:
        stop(helpers)
        shutil.rmtree(tsdb_dir, ignore_errors=True)
        Path(f"{tsdb_dir}.log").unlink(missing_ok=True)


def stop(helpers: list[subprocess.Popen]) -> None:
    """Stop the services we started, and wait for them (a store flushes its data)."""
    for proc in helpers:
        proc.terminate()
    for proc in helpers:
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()


def _pytest(args: list[str], env: dict) -> int:
    return subprocess.run([sys.executable, "-m", "pytest", *args], cwd=ROOT, env=env).returncode


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in {"run", "test"}:
        print(__doc__)
        return 2
    if argv[0] == "run":
        return run()
    args = argv[1:]
    tiers = None
    if args and args[0].startswith("--tiers="):
        tiers = args[0].removeprefix("--tiers=").split(",")
        unknown = set(tiers) - set(TIERS)
        if unknown:
            print(f"unknown tiers {sorted(unknown)}: the tiers are {', '.join(TIERS)}")
            return 2
        args = args[1:]
    return test(args, tiers)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
