"""Start the whole stack, or the test suite, on whatever services this machine has.

    python -m dashboard.stack run    # migrate, seed, then worker + beat + web, Ctrl-C stops all
    python -m dashboard.stack test   # pytest against PostgreSQL/Redis if they answer, else fallbacks
    python -m dashboard.stack test --tiers=unit+slow,stack   # the same, a run per tier (+: one run)
    python -m dashboard.stack database   # wait for DATABASE_URL's PostgreSQL, create its database (CI)

Plain Python: it runs before Django is configured, and decides what Django is given.
"""

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from dashboard.backing_services import (
    ROOT,
    VAR,
    database_wait,
    detach_and_die_with_parent,
    ensure_postgres_database,
    resolve_services,
    resolve_tsdb,
    say,
    start_vmalert,
    stop,
    wait_for_postgres,
)
from dashboard.redaction import redact_text

COLOURS = ["\033[36m", "\033[35m", "\033[33m", "\033[32m", "\033[34m"]
RESET = "\033[0m"


# --- Stopping ----------------------------------------------------------------------
# The runner installs its own handlers: Python installs its Ctrl-C handler only when SIGINT
# was not inherited ignored (a command started in the background by a non-interactive shell,
# nohup, a CI runner or a service manager inherits it ignored), and SIGTERM's default would
# end the runner without stopping what it started. The first signal unwinds the runner to
# the code that stops everything; further ones change nothing (a second Ctrl-C must not cut
# the stop short and leave processes behind).

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
STOP_WITHIN_S = 10.0  # every process the runner started is gone this long after a stop signal
# Of which the supervised processes get this much to stop by themselves (a worker finishes
# its task; Daphne under load does not stop in time and is killed), then Redis and the store
# until HELPERS_DONE_S; the rest is the margin of a loaded machine.
CHILDREN_GRACE_S = 5.0
HELPERS_DONE_S = 8.0
stop_signal: int | None = None  # the first stop signal received


def _on_stop_signal(signum, frame):
    global stop_signal
    if stop_signal is None:
        stop_signal = signum
        raise KeyboardInterrupt


def install_stop_handlers() -> None:
    for signum in STOP_SIGNALS:
        signal.signal(signum, _on_stop_signal)


# `make run` under a service manager or a script: GNU make passes SIGTERM on to the runner,
# but on SIGINT or SIGHUP it only waits for its children to end, expecting the terminal to
# have sent them the same signal (a `kill -INT <pid of make>` does not): the stack ran on
# and make waited for ever. make's handler first sets the signal back to its default, so its
# caught signals (SigCgt in /proc/<pid>/status) lose it: the runner watches make's, and stops
# as if it had been sent the signal make lost. A make that is gone (killed outright) stops it
# too (as SIGHUP). Only a make parent is watched: a runner started by a shell or by nohup
# keeps running whatever its parent does.

MAKE_NAMES = {"make", "gmake"}
MAKE_WATCH_S = 0.2


def caught_signals(pid: int) -> set[int] | None:
    """The signals process `pid` has a handler for; None when it is gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    for line in status.splitlines():
        if line.startswith("SigCgt:"):
            mask = int(line.split()[1], 16)
            return {n for n in range(1, 65) if mask >> (n - 1) & 1}
    return None


def make_parent() -> int | None:
    """The pid of the make that started this process, if make did."""
    parent = os.getppid()
    try:
        name = Path(f"/proc/{parent}/comm").read_text().strip()
    except OSError:
        return None
    return parent if name in MAKE_NAMES else None


def signal_make_got(make_pid: int, watched: set[int]) -> int | None:
    """The stop signal make is handling (one of `watched` it no longer catches), SIGHUP when
    it is gone, else None."""
    caught = caught_signals(make_pid) if os.getppid() == make_pid else None
    if caught is None:
        return signal.SIGHUP
    lost = watched - caught
    return min(lost) if lost else None


def watch_make(make_pid: int) -> None:
    """In a thread: when make gets a stop signal, send it to this process."""
    watched = (caught_signals(make_pid) or set()) & set(STOP_SIGNALS)
    while (signum := signal_make_got(make_pid, watched)) is None:
        time.sleep(MAKE_WATCH_S)
    os.kill(os.getpid(), signum)


def start_watching_make() -> None:
    make_pid = make_parent()
    if make_pid is not None:
        threading.Thread(target=watch_make, args=(make_pid,), name="watch-make", daemon=True).start()


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)


# --- Processes ---------------------------------------------------------------------


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
            text=True, bufsize=1, preexec_fn=detach_and_die_with_parent,
        )
        child.started_at = time.monotonic()
        child.restart_at = None
        threading.Thread(target=self._pump, args=(child, child.proc), daemon=True).start()

    def _pump(self, child: Child, proc: subprocess.Popen) -> None:
        tty = sys.stdout.isatty()
        name = f"{child.name:<{self.width}}|"
        prefix = f"{child.colour}{name}{RESET} " if tty else f"{name} "
        for line in proc.stdout:
            sys.stdout.write(prefix + redact_text(line))
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

    def watch(self) -> None:
        """Supervise until a stop signal (KeyboardInterrupt) ends it."""
        while True:
            self.supervise_once(time.monotonic())
            time.sleep(0.3)

    def stop(self, deadline: float | None = None) -> None:
        """SIGTERM to every process group; what is still running at `deadline` (monotonic;
        by default CHILDREN_GRACE_S from now) is killed, and so is whatever a process left in
        its group."""
        if deadline is None:
            deadline = time.monotonic() + CHILDREN_GRACE_S
        started = [c for c in self.children if c.proc is not None]
        for child in started:
            if child.proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(child.proc.pid, signal.SIGTERM)
        for child in started:
            try:
                child.proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                say(f"{child.name} did not stop in time: killed")
            _kill_group(child.proc.pid)
            child.proc.wait()


class StepFailed(Exception):
    """A start-up step (a management command) failed: it has said why."""


def manage(env: dict, *args: str) -> None:
    done = subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=env)
    if done.returncode != 0:
        raise StepFailed(f"`manage.py {args[0]}` failed (exit status {done.returncode}): the stack is not started")


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
    """Start the stack and supervise it until a stop signal; then stop every process it
    started within STOP_WITHIN_S seconds."""
    env = dict(os.environ)
    env.setdefault("PYTHONUNBUFFERED", "1")
    VAR.mkdir(parents=True, exist_ok=True)
    helpers: list[subprocess.Popen] = []
    supervisor = Supervisor(env)
    status = 0
    try:
        helpers += resolve_services(env)
        started_store = resolve_tsdb(env, VAR / "tsdb")
        helpers += started_store
        if started_store:
            helpers += start_vmalert(env, VAR)
        manage(env, "migrate", "--no-input", "-v", "0")
        manage(env, "seed_fleet")
        manage(env, "ensure_admin")
        manage(env, "collectstatic", "--no-input", "-v", "0")
        host = env.get("WEB_HOST", "127.0.0.1")
        port = env.get("WEB_PORT", "8000")
        for name, argv in processes(env, host, port):
            supervisor.start(name, argv)
        say(f"Asicmon is starting: open http://{host}:{port}/ and sign in (see the administrator line above).")
        say("Press Ctrl-C to stop the worker, beat and web server.")
        supervisor.watch()
    except KeyboardInterrupt:
        say(f"stopping… ({signal.Signals(stop_signal).name if stop_signal else 'interrupted'})")
    except StepFailed as failure:
        say(str(failure))
        status = 1
    finally:
        stop_everything(supervisor, helpers)
    return status


def stop_everything(supervisor: Supervisor, helpers: list[subprocess.Popen]) -> None:
    """The supervised processes, and meanwhile the store (it takes seconds to flush), then
    Redis (the workers use it until they end)."""
    began = time.monotonic()
    for proc in helpers:
        if "redis" not in Path(str(proc.args[0])).name and proc.poll() is None:
            proc.terminate()
    supervisor.stop(began + CHILDREN_GRACE_S)
    stop(helpers, timeout=max(0.5, began + HELPERS_DONE_S - time.monotonic()))
    say(f"stopped in {time.monotonic() - began:.1f} s")


# The suite's tiers (tests/support/tiers.py sorts the tests): `make test-fast` runs the
# first, `make test` all of them: the unit and slow tiers in one parallel run, then the
# process and browser tiers on four workers (their tests mostly wait: for processes to start,
# polls to come, the browser), a test module (and the stack it shares) on one, the longest
# modules first (tests/support/tiers.py: LONGEST_FILES; xdist's own reorder off).
# "slow" is the in-process work that is heavy by design (the largest real trace, a migration
# replayed from an old schema): out of the working loop, never out of CI. The unit tier
# starts each worker on a run of consecutive tests (a module's fixtures are mostly made
# once) and lets idle workers take over the rest ("worksteal"; per-file scheduling would run
# schemathesis's generated API tests, which share one id, only once). Three workers: each
# imports and collects the whole suite first (about 5 s of CPU), and on two cores a fourth
# cost more than it gained (unit tier, PostgreSQL: 76-83 s against 84-89 s, and 125 against
# 145 CPU-s); TEST_WORKERS=n for another machine.
# Every test under tests/browser/ is a browser test (tests/support/tiers.py), so the in-process
# tiers do not collect that folder: each worker would import Selenium and the browser tests'
# modules only to deselect them (most of a second of CPU per worker).
IN_PROCESS = "not integration and not browser and not soak"
NOT_BROWSER = "--ignore=tests/browser"
TIERS = {
    "unit": ["-m", f"{IN_PROCESS} and not slow", NOT_BROWSER, "-n", os.environ.get("TEST_WORKERS", "3"),
             "--dist", "worksteal"],
    "slow": ["-m", f"{IN_PROCESS} and slow", NOT_BROWSER, "-n", "2", "--dist", "worksteal"],
    "stack": ["-m", f"not ({IN_PROCESS})", "-n", "4", "--dist", "loadfile", "--no-loadscope-reorder"],
}
NO_TESTS_COLLECTED = 5  # pytest's exit status when a selection is empty


def test(pytest_args: list[str], tiers: list[str] | None = None) -> int:
    """Run pytest once with `pytest_args`, or once per tier (the arguments added to each)."""
    env = dict(os.environ)
    env.setdefault("PYTHONUNBUFFERED", "1")
    # Keep tests apart from a running dashboard on the same Redis (and, with
    # ASICMON_TEST_PREFIX, from another checkout's test run on the same machine).
    prefix = env.get("ASICMON_TEST_PREFIX", "asicmon-test")
    if "test" not in prefix:
        prefix = f"asicmon-test-{prefix}"
    env["REDIS_KEY_PREFIX"] = prefix
    env["CELERY_QUEUE"] = prefix
    # Where PYTHONDONTWRITEBYTECODE keeps compiled modules out of the source tree, keep them in
    # var/pycache instead: else every xdist worker, and every process a test starts, compiles
    # the project and pytest rewrites every test module afresh (half of a worker's start).
    if env.pop("PYTHONDONTWRITEBYTECODE", None):
        env.setdefault("PYTHONPYCACHEPREFIX", str(VAR / "pycache"))
    VAR.mkdir(parents=True, exist_ok=True)
    helpers = resolve_services(env)
    # A throwaway store under var/, emptied afterwards (tests keep apart by TSDB_LABELS).
    tsdb_dir = VAR / f"tsdb-test-{os.getpid()}"
    helpers += resolve_tsdb(env, tsdb_dir, on_asked_port=False)
    try:
        if not tiers:
            return _pytest(pytest_args, env)
        statuses = []
        for tier in tiers:
            args = tier_args(tier)
            say(f"{tier} tests: pytest {' '.join(args)}")
            statuses.append(_pytest([*args, *pytest_args], env))
            if statuses[-1] == NO_TESTS_COLLECTED:
                say(f"no {tier} tests in this selection")
        failed = [s for s in statuses if s != NO_TESTS_COLLECTED]
        return max(failed, default=NO_TESTS_COLLECTED)
    finally:
        stop(helpers)
        shutil.rmtree(tsdb_dir, ignore_errors=True)
        Path(f"{tsdb_dir}.log").unlink(missing_ok=True)


def tier_args(spec: str) -> list[str]:
    """pytest's arguments for a tier, or for tiers joined by "+" into one run (their tests
    together, on the first one's workers): "unit+slow"."""
    names = spec.split("+")
    first = TIERS[names[0]]
    at = first.index("-m") + 1
    chosen = " or ".join(f"({TIERS[name][TIERS[name].index('-m') + 1]})" for name in names)
    return [*first[:at], chosen if len(names) > 1 else first[at], *first[at + 1:]]


TEST_TEARDOWN_S = 60.0  # how long an interrupted pytest may take to tear its tests down


def _pytest(args: list[str], env: dict) -> int:
    """Run pytest; on a stop signal, let it tear its tests down (their teardowns stop what
    they started), and kill it if it has not ended within TEST_TEARDOWN_S."""
    proc = subprocess.Popen([sys.executable, "-m", "pytest", *args], cwd=ROOT, env=env)
    try:
        return proc.wait()
    except KeyboardInterrupt:
        if not _reached_pytest_too(stop_signal):
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGINT)  # pytest's Ctrl-C: teardowns run
        try:
            proc.wait(timeout=TEST_TEARDOWN_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        raise


def _reached_pytest_too(signum: int | None) -> bool:
    """Whether a SIGINT came from the terminal's Ctrl-C, which reaches pytest as well (it is
    in our foreground process group): else pytest is told, once."""
    if signum != signal.SIGINT:
        return False
    try:
        return os.tcgetpgrp(sys.stdin.fileno()) == os.getpgrp()
    except OSError:  # no terminal: started in the background, by a script or a CI runner
        return False


def database() -> int:
    """Wait for the PostgreSQL that DATABASE_URL names and create its database if missing
    (a new CI machine has none): nothing to do for SQLite."""
    url = os.environ.get("DATABASE_URL", "")
    if not url.startswith(("postgres://", "postgresql://")):
        say("Database: not PostgreSQL, nothing to create")
        return 0
    wait_for_postgres(url, database_wait(os.environ))
    ensure_postgres_database(url)
    say(f"Database: PostgreSQL {url} is there")
    return 0


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in {"run", "test", "database"}:
        print(__doc__)
        return 2
    install_stop_handlers()
    start_watching_make()
    if argv[0] == "run":
        return run()
    if argv[0] == "database":
        return database()
    args = argv[1:]
    tiers = None
    if args and args[0].startswith("--tiers="):
        tiers = args[0].removeprefix("--tiers=").split(",")
        unknown = {name for spec in tiers for name in spec.split("+")} - set(TIERS)
        if unknown:
            print(f"unknown tiers {sorted(unknown)}: the tiers are {', '.join(TIERS)}")
            return 2
        args = args[1:]
    try:
        return test(args, tiers)
    except KeyboardInterrupt:
        return 128 + (stop_signal or signal.SIGINT)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
