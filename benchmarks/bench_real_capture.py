"""Click → findings for a capture of a real PyTorch process, in a real Chromium (issue 50).

    .venv/bin/python benchmarks/bench_real_capture.py [--repeat 3] [--seconds 2]

Runs against the database and Redis that the environment names (DATABASE_URL, REDIS_URL),
on a throwaway database, with what a newcomer runs: Daphne and a trace worker as `make run`
starts them, a host agent (`python -m fleet.agent`, default poll interval, serving Kineto's
protocol from a socket folder of its own, on a "machine" without accelerators), and a real
PyTorch training loop (the CPU wheel) started with KINETO_USE_DAEMON=1. Each run opens the
machine's page, clicks **Capture trace** for ``--seconds`` and waits until the trace's page
has drawn its findings (the ``findings-drawn`` mark). It prints, per run, the click →
findings time and where it went, from the trace's row: queued (the agent takes the task),
capturing (waiting for the process's next poll, every 5 s, then tracing and writing),
storing and analysing (the trace worker), and the page. Goal: ≤ 15 s for 2 s on 2 cores.
Say how loaded the machine was.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

from harness import Report, median, seeded_superuser, throwaway_database, trace_env
from harness.browser import chromium, mark, quit_chromium, sign_in

PASSWORD = "bench-password-123"


def one_capture(driver, url: str, host_id: int, seconds: int) -> tuple[float, int]:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get(f"{url}/hosts/{host_id}/")
    duration = driver.find_element(By.ID, "capture-duration")
    duration.clear()
    duration.send_keys(str(seconds))
    clicked = time.monotonic()
    driver.find_element(By.ID, "capture-button").click()
    wait = WebDriverWait(driver, 120, poll_frequency=0.05)
    wait.until(lambda d: "/traces/" in d.current_url and mark(d, "findings-drawn") is not None)
    took = time.monotonic() - clicked
    return took, int(driver.current_url.rstrip("/").rsplit("/", 1)[1])


def phases(trace_id: int) -> dict[str, float]:
    from traces.models import Trace

    t = Trace.objects.get(pk=trace_id)
    assert t.status == "ready", t.error
    return {
        "queued": (t.capture_started_at - t.created_at).total_seconds(),
        "capturing+storing": (t.capture_ended_at - t.capture_started_at).total_seconds(),
        "analysing": (t.ready_at - t.capture_ended_at).total_seconds(),
        "events": t.events,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=2)
    args = parser.parse_args()

    workdir = Path(tempfile.mkdtemp(prefix="asicmon-bench-real-capture-"))
    socket_dir = tempfile.mkdtemp(prefix="kineto-")
    trace_env(workdir, "asicmon-bench-real-capture")
    held = {"services": [], "driver": None}
    try:
        with throwaway_database(close_connections=True):
            try:
                run(args, workdir, socket_dir, held)
            finally:  # before the database goes: they hold sessions on it
                if held["driver"] is not None:
                    quit_chromium(held["driver"])
                for service in reversed(held["services"]):
                    service.stop()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
        shutil.rmtree(socket_dir, ignore_errors=True)


def run(args, workdir: Path, socket_dir: str, held: dict) -> None:
    """Start the parts (kept in ``held`` for the caller to stop), run the captures, report."""
    from fleet.models import Host, HostProcess
    from tests.support.processes import Service, child_env, start_web, start_worker
    from tests.support.pytorch_jobs import training_process
    from traces.tasks import trace_queue

    seeded_superuser(password=PASSWORD)
    env = child_env(TRACE_STORAGE_DIR=workdir / "traces")
    (workdir / "hwmon").mkdir()
    agent = Service("agent", [sys.executable, "-m", "fleet.agent"], {
        **env, "AGENT_HOST": "bench-node", "AGENT_KINETO": socket_dir, "HWMON_ROOT": str(workdir / "hwmon"),
        "ASIMOV_SPEC_DIRS": "", "AGENT_KERNEL_LOG": "", "AGENT_STATE_DIR": str(workdir / "agent"),
        "LOG_LEVEL": "INFO"})  # its "ready." line
    services = held["services"]
    services.append(agent)
    services.append(start_worker(env, concurrency=1, queue=trace_queue()))
    web, url = start_web(env)
    services.append(web)
    agent.wait_for_line("ready.", timeout=90)
    listed = lambda pid: HostProcess.objects.filter(pid=pid).exists()  # noqa: E731
    with training_process(socket_dir, workdir, seconds=3600, polled=listed) as loop:
        host = Host.objects.get(name="bench-node")
        driver = held["driver"] = chromium()
        sign_in(driver, url, "bench", PASSWORD)
        report = Report(f"click -> findings drawn, a {args.seconds} s capture of a real PyTorch process "
                        f"(pid {loop.pid}, CPU wheel) through its host's agent")
        runs = []
        for k in range(args.repeat):
            took, trace_id = one_capture(driver, url, host.pk, args.seconds)
            parts = phases(trace_id)
            runs.append(took)
            page = took - parts["queued"] - parts["capturing+storing"] - parts["analysing"]
            report.line(f"  run {k + 1}: {took:.1f} s  (queued {parts['queued']:.1f}, waiting for the poll + tracing "
                        f"+ writing + storing {parts['capturing+storing']:.1f}, analysing {parts['analysing']:.1f}, "
                        f"page and websocket {page:.1f}; {parts['events']:,} events)")
        report.figure("click -> findings, median", round(median(runs), 1), "s",
                      note=f"best {min(runs):.1f}, worst {max(runs):.1f} over {len(runs)} runs; goal <= 15 s")
        report.write_json()

if __name__ == "__main__":
    main()
