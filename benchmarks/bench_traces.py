"""Trace figures: upload → ready, worker peak memory, page and API server times, capture start.

    python benchmarks/bench_traces.py [--sizes 10000,100000,1000000] [--repeat 5]

Runs against the database and Redis that the environment names (DATABASE_URL, REDIS_URL),
on a throwaway database it creates and drops, with a real Celery worker on the traces
queue (solo pool, so its peak RSS is the analysis's). For each generated Kineto trace it
prints: the upload request (it scans the whole file to refuse a bad one), upload → ready
wall time, the worker's peak RSS, and the server time of the trace page, the breakdown
API and a drill-down (median of --repeat, after one cold request). Then a 5 s capture:
from the click (the POST) to the first progress message on the trace's channel group.
"""

import argparse
import shutil
import tempfile
import time
from pathlib import Path

from harness import (
    Report,
    cpu_seconds,
    peak_rss_mb,
    reset_peak,
    seeded_superuser,
    stop_all,
    throwaway_database,
    timed,
    trace_env,
    trace_worker,
    wait_for,
)


def cold_warm(fn, repeat: int) -> tuple[float, float]:
    """(cold, median of warm) milliseconds."""
    timing = timed(fn, repeat, cold=True)
    return timing.cold * 1000, timing.median * 1000


def wait_ready(trace_id: int, timeout: float = 600) -> None:
    from traces.models import Trace

    def done() -> bool:
        status, error = Trace.objects.filter(pk=trace_id).values_list("status", "error").get()
        if status == "failed":
            raise SystemExit(f"trace {trace_id} failed: {error}")
        return status == "ready"

    wait_for(done, timeout, f"trace {trace_id} not ready", interval=0.02)


def wait_chrome(trace_id: int, timeout: float = 600) -> None:
    """The Chrome export is written after 'ready', by the same task: let it finish."""
    from traces import writers
    from traces.models import Trace

    deadline = time.time() + timeout
    while time.time() < deadline and not writers.chrome_ready(Trace.objects.get(pk=trace_id)):
        time.sleep(0.05)


def bench_size(report: Report, client, worker_pid: int, n: int, workdir: Path, repeat: int) -> None:
    from tests.support.tracegen import write_kineto_trace

    path = workdir / f"kineto-{n}.json.gz"
    events = write_kineto_trace(path, n, seed=n)
    reset_peak(worker_pid)
    worker_cpu = cpu_seconds(worker_pid)
    t0, cpu0 = time.perf_counter(), time.process_time()
    with path.open("rb") as f:
        response = client.post("/api/traces/", {"file": f})
    upload_s, upload_cpu = time.perf_counter() - t0, time.process_time() - cpu0
    assert response.status_code == 201, response.content[:300]
    trace_id = response.json()["id"]
    wait_ready(trace_id)
    ready_s = time.perf_counter() - t0
    analysis_cpu = cpu_seconds(worker_pid) - worker_cpu  # read, breakdown, views, results
    wait_chrome(trace_id)
    rss = peak_rss_mb(worker_pid)
    rows = client.get(f"/api/traces/{trace_id}/breakdown/?side=device").json()["results"]
    busiest = max(rows, key=lambda r: r["count"])
    page = cold_warm(lambda: client.get(f"/traces/{trace_id}/"), repeat)
    breakdown = cold_warm(lambda: client.get(f"/api/traces/{trace_id}/breakdown/?side=host"), repeat)
    drill = cold_warm(lambda: client.get(f"/api/traces/{trace_id}/instances/", {"side": "device", "op": busiest["op"], "limit": 50}), repeat)
    report.line(
        f"{events:>9,} events {path.stat().st_size / 1e6:7.1f} MB gz | upload request {upload_s:6.2f} s "
        f"(CPU {upload_cpu:5.2f} s) | upload→ready {ready_s:6.2f} s (worker CPU to ready {analysis_cpu:5.2f} s) | "
        f"worker peak RSS {rss:7.0f} MB | "
        f"page {page[0]:6.1f}/{page[1]:6.1f} ms | breakdown {breakdown[0]:6.1f}/{breakdown[1]:6.1f} ms | "
        f"drill-down ({busiest['count']:,} instances) {drill[0]:6.1f}/{drill[1]:6.1f} ms"
    )


def bench_capture(report: Report, client) -> None:
    from asgiref.sync import async_to_sync
    from channels.layers import get_channel_layer

    from fleet.models import Device
    from traces.events import trace_group

    layer = get_channel_layer()
    device = Device.objects.first()

    async def first_progress(trace_id: int, clicked: float) -> dict[str, float]:
        """Seconds from the click to each message of the trace's group, up to the first progress."""
        channel = await layer.new_channel()
        await layer.group_add(trace_group(trace_id), channel)
        seen: dict[str, float] = {}
        while True:
            message = await layer.receive(channel)
            label = message["type"] if message["type"] == "trace.progress" else f"{message['status']}"
            seen.setdefault(label, time.perf_counter() - clicked)
            if message["type"] == "trace.progress":
                return seen

    clicked = time.perf_counter()  # (the trace worker is idle: every earlier trace is done)
    response = client.post(f"/api/devices/{device.id}/capture/", {"duration_s": 5}, content_type="application/json")
    answered = time.perf_counter() - clicked
    assert response.status_code == 202, response.content[:300]
    seen = async_to_sync(first_progress)(response.json()["id"], clicked)
    wait_ready(response.json()["id"])
    steps = ", ".join(f"{label} {t * 1000:.0f} ms" for label, t in seen.items())
    report.line(
        f"capture click → first progress message: {seen['trace.progress'] * 1000:.0f} ms "
        f"(POST answered {answered * 1000:.0f} ms; then {steps}; 5 s capture, then ready)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="10000,100000,1000000", help="Comma-separated; empty: the capture only")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()

    workdir = Path(tempfile.mkdtemp(prefix="asicmon-bench-traces-"))
    trace_env(workdir, "asicmon-bench-traces")
    from django.test import Client

    from traces.tasks import trace_queue

    workers = []
    try:
        with throwaway_database():
            try:
                user = seeded_superuser()
                client = Client()
                client.force_login(user)
                workers.append(trace_worker(trace_queue(), "bench-traces"))
                report = Report("Trace figures (cold/warm-median server times; the machine may be shared and loaded)")
                for n in [int(s) for s in args.sizes.split(",") if s.strip()]:
                    bench_size(report, client, workers[0].pid, n, workdir, args.repeat)
                client.get("/api/traces/")  # a served process has its URLs and API loaded already
                bench_capture(report, client)  # the first capture this process queues (the broker connection opens)
                bench_capture(report, client)
            finally:
                stop_all(workers, timeout=30)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

if __name__ == "__main__":
    main()
