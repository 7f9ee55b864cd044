"""`bench_fleet_capacity.py run`: the stack's Celery beat and worker(s) poll N emulated
devices for a few minutes on PostgreSQL; then every shard's slots are counted.

The run gets its own database (``<DATABASE_URL's name>_capacity``, created afresh), Redis
key prefix, Celery queue and emulator state folder, so a running dashboard is not
disturbed. While it runs, a web server (Daphne) serves the sign-in page and /metrics
(every device's latest snapshot and health), fetched every few seconds: the live stack
still serves pages. A slot is *whole* for a shard when every device of the shard has its
samples at that cycle in the time-series store, *partial* when some do (never expected: a
shard's samples are one batch), a *gap* when none do. The samples go to the store at TSDB_URL
under a label of the run's own (TSDB_LABELS); when none answers there, a throwaway
VictoriaMetrics is started for the run.
"""

from __future__ import annotations

import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from urllib.parse import urlparse, urlunparse

from harness import median

ROOT = Path(__file__).resolve().parent.parent
LOGS = ROOT / "var" / "capacity"
SHARD_LINE = re.compile(r"shard (\d+) cycle (\d+): (\d+) devices, \d+ samples in ([\d.]+) ms")
GAP_LINE = re.compile(r"shard (\d+) cycle (\d+): a gap")
WARM_UP_S = 30.0  # the first cycles open every host's monitors: counted apart


def _run_env(args) -> dict:
    url = os.environ.get("DATABASE_URL", "")
    if not url.startswith(("postgres://", "postgresql://")):
        sys.exit("the real run needs PostgreSQL: set DATABASE_URL=postgres://…")
    parts = urlparse(url)
    name = (parts.path.lstrip("/") or "asicmon") + "_capacity"
    tag = f"asicmon-capacity-{os.getpid()}"
    env = dict(os.environ)
    env.update(
        DATABASE_URL=urlunparse(parts._replace(path=f"/{name}")),
        REDIS_KEY_PREFIX=tag, CELERY_QUEUE=tag,
        FLEET_HOSTS=str(max(1, args.devices // 8)), FLEET_DEVICES_PER_HOST="8",
        POLL_SHARDS=str(args.shards), POLL_INTERVAL=str(args.interval),
        EMULATOR_STATE_DIR=tempfile.mkdtemp(prefix="asicmon-capacity-state-"),
        METRICS_TOKEN="capacity-bench", LOG_LEVEL="INFO", PYTHONUNBUFFERED="1",
        DJANGO_SETTINGS_MODULE="dashboard.settings",
        TSDB_LABELS=f"asicmon_capacity={os.getpid()}",
        TSDB_BUFFER_DIR=tempfile.mkdtemp(prefix="asicmon-capacity-spool-"),
    )
    return env


def _fresh_database(url: str) -> None:
    import psycopg
    from psycopg import sql

    from dashboard.backing_services import _postgres_dsn

    parts = urlparse(url)
    with psycopg.connect(_postgres_dsn(parts, "postgres"), autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(parts.path.lstrip("/"))))
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(parts.path.lstrip("/"))))


def _start(name: str, argv: list[str], env: dict) -> subprocess.Popen:
    LOGS.mkdir(parents=True, exist_ok=True)
    log = (LOGS / f"{name}.log").open("w")
    return subprocess.Popen(argv, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def _cpu_seconds(group: int) -> float:
    """CPU seconds of the processes of a process group still alive (a worker and its pool)."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == group:  # pgrp
            total += (int(fields[11]) + int(fields[12])) / tick
    return total


class PageProbe(threading.Thread):
    """Fetches the sign-in page and /metrics every few seconds; keeps latencies and errors."""

    def __init__(self, port: int) -> None:
        super().__init__(daemon=True)
        self.port, self.stop, self.seconds, self.errors = port, threading.Event(), [], []

    def run(self) -> None:
        while not self.stop.wait(5.0):
            for path, headers in (("/accounts/login/", {}), ("/metrics", {"Authorization": "Bearer capacity-bench"})):
                t0 = time.perf_counter()
                try:
                    request = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", headers=headers)
                    with urllib.request.urlopen(request, timeout=10) as response:
                        response.read()
                    self.seconds.append(time.perf_counter() - t0)
                except Exception as exc:  # any failure to serve counts against the stack
                    self.errors.append(f"{path}: {exc}")


def real_run(args) -> None:
    from dashboard.backing_services import free_port, resolve_tsdb
    from dashboard.backing_services import stop as stop_helpers

    env = _run_env(args)
    _fresh_database(env["DATABASE_URL"])
    helpers = resolve_tsdb(env, Path(tempfile.mkdtemp(prefix="asicmon-capacity-tsdb-")))
    manage = [sys.executable, "manage.py"]
    subprocess.run([*manage, "migrate", "--no-input", "-v", "0"], cwd=ROOT, env=env, check=True)
    subprocess.run([*manage, "seed_fleet"], cwd=ROOT, env=env, check=True, stdout=subprocess.DEVNULL)
    celery = str(Path(sys.executable).parent / "celery")
    port = free_port()
    worker = _start("worker", [celery, "-A", "dashboard", "worker", "-l", "info", "--concurrency", str(args.workers),
                               "-Q", env["CELERY_QUEUE"], "-n", f"capacity-{os.getpid()}@%h"], env)
    web = _start("web", [str(Path(sys.executable).parent / "daphne"), "-b", "127.0.0.1", "-p", str(port),
                         "dashboard.asgi:application"], env)
    time.sleep(8)  # the worker is up before the first cycle is sent
    beat = _start("beat", [celery, "-A", "dashboard", "beat", "-l", "warning",
                           "-s", str(LOGS / f"beat-schedule-{os.getpid()}")], env)
    started = time.time()
    pages = PageProbe(port)
    pages.start()
    loads = []
    print(f"run: {args.devices:,} devices, {args.shards} shards, {args.workers} worker process(es), "
          f"{args.minutes:g} min at {args.interval:g} s (logs in {LOGS})", flush=True)
    try:
        while time.time() - started < args.minutes * 60:
            time.sleep(10)
            loads.append(os.getloadavg()[0])
        worker_cpu = _cpu_seconds(worker.pid)
    finally:
        stopped = time.time()
        pages.stop.set()
        for proc in (beat, worker, web):
            _stop(proc)
    try:
        _report(args, env, started, stopped, loads, worker_cpu, pages)
    finally:
        stop_helpers(helpers)
    if not args.keep:
        _drop(env)


def _drop(env: dict) -> None:
    """The run's database and Redis keys go (its logs stay under var/capacity)."""
    from django.db import connections

    from fleet.redis import get_redis

    connections.close_all()
    client = get_redis()
    for pattern in (f"{env['REDIS_KEY_PREFIX']}*", f"_kombu.binding*{env['CELERY_QUEUE']}*"):
        for name in client.scan_iter(match=pattern, count=1000):
            client.delete(name)
    import psycopg
    from psycopg import sql

    from dashboard.backing_services import _postgres_dsn

    parts = urlparse(env["DATABASE_URL"])
    with psycopg.connect(_postgres_dsn(parts, "postgres"), autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(parts.path.lstrip("/"))))


def _count_slots(env: dict, first: float, last: float, shards: int) -> tuple[dict, dict]:
    """Devices with samples in the store, by shard and cycle, for cycles in [first, last]:
    per slot, the devices of each host with a utilization sample stamped in it."""
    keys = ("DATABASE_URL", "REDIS_KEY_PREFIX", "POLL_SHARDS", "POLL_INTERVAL", "TSDB_URL", "TSDB_WRITE_URL", "TSDB_LABELS")
    os.environ.update({k: env[k] for k in keys if k in env})
    import django

    django.setup()
    from django.db.models import Count

    from fleet import tsdb
    from fleet.models import Host
    from fleet.tsdb.series import selector

    shard_of = {name: host_id % shards for host_id, name in Host.objects.values_list("id", "name")}
    interval = float(env["POLL_INTERVAL"])
    window = f"{round(interval * 1000) - 1}ms"  # (slot - interval, slot]: one slot's samples
    counts: dict[int, dict[float, int]] = {shard: {} for shard in range(shards)}
    promql = f"sum by (host) (count_over_time({selector('asicmon_device_utilization')}[{window}]))"
    step_points = 10_000
    start = first
    while start <= last:
        end = min(last, start + (step_points - 1) * interval)
        for series in tsdb.client().query_range(promql, start, end, interval):
            shard = shard_of[series.labels["host"]]
            for t, n in series.points:
                counts[shard][t] = counts[shard].get(t, 0) + int(n)
        start = end + interval
    per_host = Host.objects.annotate(n=Count("devices")).values_list("id", "n")
    expected: dict[int, int] = {}
    for host_id, n in per_host:
        expected[host_id % shards] = expected.get(host_id % shards, 0) + n
    return counts, expected


def _shard_seconds() -> dict[int, list[float]]:
    seconds: dict[int, list[float]] = {}
    for line in (LOGS / "worker.log").read_text(errors="replace").splitlines():
        if m := SHARD_LINE.search(line):
            seconds.setdefault(int(m[1]), []).append(float(m[4]) / 1000)
    return seconds


def _report(args, env, started, stopped, loads, worker_cpu, pages) -> None:
    interval = args.interval
    first = (started // interval + 1) * interval  # the first slot beat can have sent whole
    last = (stopped // interval - 1) * interval  # the last slot that ended before the stop
    counts, expected = _count_slots(env, first, last, args.shards)
    cycles = [first + k * interval for k in range(int((last - first) / interval) + 1)]
    measured = [c for c in cycles if c >= started + WARM_UP_S]
    seconds = _shard_seconds()
    print(f"\n{args.devices:,} devices ({sum(expected.values()):,} seeded), {args.workers} worker process(es), "
          f"{args.shards} shards, {(stopped - started) / 60:.1f} min; load average during the run: "
          f"mean {statistics.mean(loads or [0]):.1f}, max {max(loads or [0]):.1f} (2 cores, shared)")
    print(f"  slots after the {WARM_UP_S:g} s warm-up: {len(measured)} per shard")
    totals = {"whole": 0, "partial": 0, "gap": 0}
    for shard in range(args.shards):
        n = expected.get(shard, 0)
        kinds = {"whole": 0, "partial": 0, "gap": 0}
        for c in measured:
            got = counts[shard].get(c, 0)
            kinds["whole" if got == n else "partial" if got else "gap"] += 1
        for k in totals:
            totals[k] += kinds[k]
        secs = seconds.get(shard, [])
        timing = f"poll {median(secs):.2f} s median, {max(secs):.2f} s max" if secs else "no poll logged"
        print(f"  shard {shard} ({n:,} devices): {kinds['whole']} whole, {kinds['partial']} partial, {kinds['gap']} gaps; {timing}")
    slots = sum(totals.values())
    print(f"  all shards: {totals['whole']}/{slots} slots whole ({100 * totals['whole'] / max(1, slots):.1f} %), "
          f"{totals['partial']} partial, {totals['gap']} gaps; warm-up slots whole: "
          f"{sum(counts[s].get(c, 0) == expected.get(s, 0) for s in range(args.shards) for c in cycles if c not in measured)}"
          f"/{args.shards * (len(cycles) - len(measured))}")
    print(f"  worker CPU: {worker_cpu:.0f} s over {stopped - started:.0f} s "
          f"({worker_cpu / max(1.0, stopped - started):.2f} cores)")
    if pages.seconds:
        ordered = sorted(pages.seconds)
        print(f"  pages served while polling: {len(ordered)} ok, {len(pages.errors)} failed; "
              f"median {median(ordered) * 1000:.0f} ms, p95 {ordered[int(0.95 * (len(ordered) - 1))] * 1000:.0f} ms")
    for error in pages.errors[:3]:
        print(f"    {error}")
