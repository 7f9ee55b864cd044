"""The services the stack needs, found or started: Redis, the database, the time-series
store (VictoriaMetrics, and vmalert for its recording rules). Used by `dashboard.stack` for
`run` and `test`, and by benchmarks that need a store of their own.

Plain Python: it runs before Django is configured, and decides what Django is given.
"""

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlparse

from dashboard.redaction import redact_text, redact_url

ROOT = Path(__file__).resolve().parent.parent
VAR = Path(os.environ.get("ASICMON_VAR_DIR", ROOT / "var"))
DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"
DEFAULT_TSDB_URL = "http://127.0.0.1:8428"
# How long a configured PostgreSQL may take to answer before the stack refuses to start.
DEFAULT_DATABASE_WAIT_S = 30.0


def say(message: str) -> None:
    """Print a line of the runner's, any URL's password in it masked."""
    print(f"\033[1m[asicmon]\033[0m {redact_text(message)}", flush=True)


def detach_and_die_with_parent() -> None:
    """In the child: own process group (Ctrl-C reaches only us), and die if we die."""
    os.setsid()
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


# --- Found or started ----------------------------------------------------------------------


def redis_answers(url: str) -> bool:
    import redis

    try:
        return bool(redis.Redis.from_url(url, socket_connect_timeout=1, socket_timeout=1).ping())
    except (redis.RedisError, OSError, ValueError):
        return False


def postgres_answers(url: str) -> bool:
    return postgres_refusal(url) is None


def postgres_refusal(url: str) -> str | None:
    """Why the PostgreSQL server a URL names does not answer, or None when it does."""
    import psycopg

    parts = urlparse(url)
    try:
        with psycopg.connect(_postgres_dsn(parts, "postgres"), connect_timeout=2):
            return None
    except psycopg.Error as exc:
        return redact_text(str(exc).strip()) or type(exc).__name__


def wait_for_postgres(url: str, wait_s: float) -> None:
    """Return once the PostgreSQL server at `url` answers; exit with its last refusal when it
    has not within `wait_s` seconds. A configured database is never swapped for another."""
    deadline = time.monotonic() + wait_s
    waited = False
    while (refusal := postgres_refusal(url)) is not None:
        if time.monotonic() >= deadline:
            sys.exit(f"Database: PostgreSQL at {redact_url(url)} did not answer within {wait_s:g} s "
                     f"(DATABASE_WAIT): {refusal}")
        if not waited:
            say(f"Database: PostgreSQL at {url} does not answer yet ({refusal}); "
                f"waiting up to {wait_s:g} s")
            waited = True
        time.sleep(min(1.0, max(0.0, deadline - time.monotonic())))


def database_wait(env: dict) -> float:
    raw = env.get("DATABASE_WAIT") or str(DEFAULT_DATABASE_WAIT_S)
    try:
        return max(0.0, float(raw))
    except ValueError:
        sys.exit(f"DATABASE_WAIT={raw!r} is not a number of seconds")


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
        preexec_fn=detach_and_die_with_parent,  # stopped by the runner, after what uses it
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


def start_victoria_metrics(data_dir: Path, port: int, retention_days: int,
                           extra_args: tuple[str, ...] = ()) -> tuple[subprocess.Popen, str]:
    """Start VictoriaMetrics on `port` with its data in `data_dir` (its log beside it), with
    `extra_args` added to its flags (a benchmark turns its result cache off)."""
    data_dir.mkdir(parents=True, exist_ok=True)
    with (data_dir.parent / f"{data_dir.name}.log").open("ab") as log:
        proc = subprocess.Popen(
            [*victoria_metrics_argv(data_dir, port, retention_days), *extra_args], stdout=log, stderr=subprocess.STDOUT,
            preexec_fn=detach_and_die_with_parent,
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
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, preexec_fn=detach_and_die_with_parent)
    say(f"vmalert records the fleet-wide aggregates ({rules})")
    return [proc]


def _local_port(url: str) -> int | None:
    """The port of a URL on this machine that nothing listens on yet, else None."""
    parts = urlparse(url)
    if parts.hostname not in {"127.0.0.1", "localhost"}:
        return None
    port = parts.port or 80
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the store binds it
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return None
    return port


def resolve_tsdb(env: dict, data_dir: Path, *, on_asked_port: bool = True) -> list[subprocess.Popen]:
    """Point env at a time-series store that answers, starting VictoriaMetrics with its data
    in `data_dir` when none does: on TSDB_URL's port when that is a free local one and
    `on_asked_port`, else on a free port (a test run's throwaway store must not take the
    shared address, where other runs would find it and lose it when this one ends)."""
    url = env.get("TSDB_URL") or DEFAULT_TSDB_URL
    if tsdb_answers(url):
        say(f"Time-series store: {url}" + (f", writes to {env['TSDB_WRITE_URL']}" if env.get("TSDB_WRITE_URL") else ""))
        return []
    retention = env.get("SAMPLE_RETENTION_DAYS") or "30"
    if not retention.isdigit() or int(retention) < 1:
        sys.exit(f"SAMPLE_RETENTION_DAYS={retention!r} is not a number of days")
    port = (_local_port(url) if on_asked_port else None) or free_port()
    proc, env["TSDB_URL"] = start_victoria_metrics(data_dir, port, int(retention))
    if not env.get("TSDB_WRITE_URL") or env["TSDB_WRITE_URL"].rstrip("/") == url.rstrip("/"):
        env["TSDB_WRITE_URL"] = env["TSDB_URL"]
    say(f"Time-series store: nothing answered at {url}, started VictoriaMetrics at {env['TSDB_URL']} "
        f"(data in {data_dir}, kept {retention} days)")
    return [proc]


def resolve_services(env: dict) -> list[subprocess.Popen]:
    """Check that the configured database answers (a PostgreSQL that does not, within
    DATABASE_WAIT seconds, stops the start with its reason; SQLite only when DATABASE_URL is
    unset), create its database if missing, and point env at a Redis that answers, started
    if none does. Returns the processes started."""
    database_url = env.get("DATABASE_URL", "")
    if database_url.startswith(("postgres://", "postgresql://")):
        wait_for_postgres(database_url, database_wait(env))
        say(f"Database: PostgreSQL {database_url}")
        ensure_postgres_database(database_url)
    elif database_url:
        say(f"Database: {database_url}")
    else:  # SQLite only when no database is configured
        say(f"Database: SQLite {VAR / 'db.sqlite3'} (DATABASE_URL is not set)")
    started = []
    redis_url = env.get("REDIS_URL") or DEFAULT_REDIS_URL
    if redis_answers(redis_url):
        say(f"Redis: {redis_url}")
    else:
        proc, redis_url = start_throwaway_redis()
        started.append(proc)
        say(f"Redis: nothing answered, started a throwaway redis-server at {redis_url}")
    env["REDIS_URL"] = redis_url

    broker = env.get("CELERY_BROKER_URL")
    say(f"Broker: {broker}" if broker else "Broker: Redis (set CELERY_BROKER_URL=amqp://… for RabbitMQ)")
    return started


def stop(helpers: list[subprocess.Popen], timeout: float = 15.0) -> None:
    """Stop the services we started, and wait for them (a store flushes its data) at most
    `timeout` seconds in all; one still running then is killed."""
    for proc in helpers:
        if proc.poll() is None:
            proc.terminate()
    deadline = time.monotonic() + timeout
    for proc in helpers:
        try:
            proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            say(f"{Path(str(proc.args[0])).name} did not stop in time: killed")
            proc.kill()
            proc.wait()
