"""Distributed-job figures: the straggler named with its reason, latency, scale, versions.

    python benchmarks/bench_jobs.py [--runs 20] [--only accuracy,latency,scale,arrivals,versions]

Runs against the PostgreSQL and Redis the environment names (DATABASE_URL, REDIS_URL), on a
throwaway database it creates and drops.

* accuracy: ``--runs`` 16-rank data-parallel jobs with a fault injected on one device
  (overheat, a degraded PCIe link, an ECC storm, a regressed software version on that device,
  in turn, on a different rank each time), each captured live (2 s) and analysed through the
  services, the fleet polled before it: how often the faulty device is named as the straggler
  *with the fleet's reason of the right kind*; and ``--runs`` fault-free jobs: how often a
  straggler is named (it should never be).
* latency: a 16-rank 5 s capture through the API and a real trace worker (concurrency 3, as
  ``make run`` starts it): from the end of the capture window to the job being ready.
* scale: a 64-rank job of about 125k events per rank (benchmarks/job_inputs.py; generated
  once), uploaded, then analysed by 2 and by 3 trace worker processes (solo pools): upload →
  ready, and each worker's peak RSS.
* arrivals: the scale job's ranks sent one at a time over ``--spread`` seconds (each host
  as it finishes) to a job opened with its world size, 2 trace workers: last rank in →
  ready (each rank is digested when it arrives).
* versions: a release whose step is about 5 % slower (one operator 2.4x slower) against its
  predecessor, three captures each; and three captures of one version labelled as two.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import shutil
import tempfile
import time
from pathlib import Path

from harness import (
    ROOT,
    Report,
    cpu_seconds,
    django_env,
    median,
    peak_rss_mb,
    reset_peak,
    stop_all,
    throwaway_database,
    trace_worker,
    wait_for,
)
from harness import wipe_redis as wipe

PREFIX = "asicmon-bench-jobs"
FAULTS = ("overheat", "pcie_degraded", "ecc_storm", "software")
REASON_KIND = {"overheat": "throttled", "pcie_degraded": "pcie", "ecc_storm": "ecc", "software": "software"}


def start_worker(queue: str, name: str, pool: str = "solo", concurrency: int = 1):
    return trace_worker(queue, name, pool=pool, concurrency=concurrency, LOG_LEVEL="INFO")


def stop(procs) -> None:
    stop_all(procs)


def wipe_redis() -> None:
    wipe(f"{PREFIX}*")


def wait_job(job_id: int, timeout: float = 900):
    from traces.models import Job

    def done():
        job = Job.objects.get(pk=job_id)
        return job if job.status in ("ready", "failed") else None

    return wait_for(done, timeout, f"job {job_id} not done")


# -- the fleet --------------------------------------------------------------------------------
def fleet_devices(count: int):
    """``count`` GPU-like devices on software 2.0 (from as many hosts as it takes), and one
    device on another version (for the software fault)."""
    from emulator.config import find_host
    from fleet.hosts.emulated_fleet import fleet_config
    from fleet.models import Device

    cfg = fleet_config()
    devices = list(Device.objects.select_related("host").order_by("host__name", "index"))
    version = {d.pk: find_host(cfg, d.host.name).device(d.serial).sw_version for d in devices}
    same = [d for d in devices if version[d.pk] == "2.0"][:count]
    other = next(d for d in devices if version[d.pk] == "2.1")
    return same, other


def prepare(devices, fault: str | None, victim, state_dir: Path) -> None:
    """The job has run on the devices for 15 minutes (the fault since it started); the fleet
    polled them just now."""
    from django.conf import settings

    from fleet.health import index as health_index
    from fleet.hosts import emulated_fleet
    from fleet.models import HealthEvent
    from fleet.polling import poller

    settings.EMULATOR_STATE_DIR = state_dir
    emulated_fleet.host_monitor.cache_clear()
    HealthEvent.objects.all().delete()
    wipe_redis()
    health_index.forget([d.pk for d in devices])
    now = time.time()
    for name in {d.host.name for d in devices}:
        host = emulated_fleet.host_monitor(name).host
        with host.locked():
            host.sync(now - 900)
            for d in devices:
                if d.host.name == name:
                    host.occupy(d.serial, now + 600)
            if fault and fault != "software" and victim.host.name == name:
                host.inject_fault(victim.serial, fault)
            host.advance(now - 2)
            host.save()
    for cycle in (now - 2, now):
        for shard in poller.shards():
            poller.poll_shard(shard, cycle)


def run_job_in_process(user, devices, duration: float):
    from traces.jobs import analysis as job_analysis
    from traces.jobs import capture as job_capture
    from traces.jobs import results as job_results
    from traces.models import Job

    job = job_capture.request_job_capture(user, devices, duration, name="bench")
    job_capture.run_job_capture(job.pk)
    for r in Job.objects.get(pk=job.pk).ranks.filter(status="analysing"):
        job_analysis.analyse_rank(job.pk, r.rank)
    job_results.combine(job.pk)
    return Job.objects.get(pk=job.pk)


def bench_accuracy(user, runs: int, workdir: Path) -> None:
    from traces.jobs import results as job_results

    same, other = fleet_devices(16)
    named = with_reason = 0
    misses = []
    started = time.perf_counter()
    for k in range(runs):
        fault = FAULTS[k % len(FAULTS)]
        position = (3 + 5 * k) % 16
        devices = list(same)
        if fault == "software":
            devices[position] = other
        victim = devices[position]
        prepare(devices, fault, victim, workdir / f"emulator-fault-{k}")
        job = run_job_in_process(user, devices, 2.0)
        finding = job_results.read_report(job)["straggler"] if job.status == "ready" else None
        right = finding is not None and finding["rank"] == position and job.straggler_device_id == victim.pk
        kinds = [r["kind"] for r in (finding or {}).get("reasons", [])]
        named += right
        with_reason += right and REASON_KIND[fault] in kinds
        if not (right and REASON_KIND[fault] in kinds):
            misses.append(f"{fault} on rank {position}: named {job.straggler_rank}, reasons {kinds} {job.error}")
    print(f"accuracy: faulty device named as the straggler in {named}/{runs} runs, with its health reason of the "
          f"right kind in {with_reason}/{runs} ({100 * with_reason / runs:.0f} %) across {', '.join(FAULTS)}")
    for miss in misses:
        print(f"  miss: {miss}")
    false = 0
    for k in range(runs):
        prepare(same, None, None, workdir / f"emulator-clean-{k}")
        job = run_job_in_process(user, same, 2.0)
        false += job.straggler_rank is not None or job.status != "ready"
    print(f"accuracy: fault-free jobs naming a straggler: {false}/{runs}  "
          f"({time.perf_counter() - started:.0f} s for {2 * runs} jobs of 16 ranks)")


def bench_latency(client, workdir: Path, repeat: int = 3) -> None:
    from traces.tasks import trace_queue

    same, _ = fleet_devices(16)
    worker = start_worker(trace_queue(), "latency", pool="prefork", concurrency=3)
    try:
        after = []
        for k in range(repeat):
            prepare(same, None, None, workdir / f"emulator-latency-{k}")
            response = client.post("/api/jobs/capture/", {"devices": [d.pk for d in same], "duration_s": 5},
                                   content_type="application/json")
            assert response.status_code == 202, response.content[:300]
            job = wait_job(response.json()["id"])
            assert job.status == "ready", job.error
            window_end = job.capture_started_at.timestamp() + 5
            after.append(job.ready_at.timestamp() - window_end)
            print(f"latency: 16-rank 5 s capture: window end → ready {after[-1]:.1f} s "
                  f"(capture stored {job.capture_ended_at.timestamp() - window_end:.1f} s after the window)")
        print(f"latency: median {median(after):.1f} s after the capture window (target ≤ 30 s)")
    finally:
        stop([worker])


def bench_scale(user, workdir: Path, ranks: int, events: int) -> None:
    from django.core.files import File
    from job_inputs import job_files

    from traces.jobs import analysis as job_analysis
    from traces.jobs import uploads as job_uploads
    from traces.tasks import trace_queue

    files = job_files(ranks, events, ROOT / "var" / "bench" / "jobs")
    size = sum(f.stat().st_size for f in files)
    for workers in (2, 3):
        handles = [f.open("rb") for f in files]
        try:
            job = job_uploads.accept_job_upload([File(h, name=f.name) for h, f in zip(handles, files)], user,
                                                name=f"scale-{workers}")
        finally:
            for h in handles:
                h.close()
        procs = [start_worker(trace_queue(), f"scale{k}") for k in range(workers)]
        try:
            for p in procs:
                reset_peak(p.pid)
            cpu0 = [cpu_seconds(p.pid) for p in procs]
            t0 = time.perf_counter()
            job_analysis.start_analysis(job.pk, ["queued"])
            done = wait_job(job.pk)
            took = time.perf_counter() - t0
            rss = [peak_rss_mb(p.pid) for p in procs]
            cpu = [cpu_seconds(p.pid) - c for p, c in zip(procs, cpu0)]
        finally:
            stop(procs)
            wipe_redis()  # the ranks' own trace analyses queued after the job's: not measured here
        events_total = sum(r.events or 0 for r in done.ranks.all())
        print(f"scale: {ranks} ranks, {events_total:,} events ({size / 1e6:.0f} MB gz), {workers} trace workers: "
              f"analysis start → ready {took:.1f} s (worker CPU {' / '.join(f'{c:.0f}' for c in cpu)} s), "
              f"peak RSS per worker {' / '.join(f'{r:.0f}' for r in rss)} MB; the cross-rank step "
              f"{done.summary.get('cross_rank_s', 0):.1f} s of it; straggler rank {done.straggler_rank}; {done.status}")


def bench_arrivals(user, ranks: int, events: int, spread_s: float, workers: int = 2) -> None:
    """The scale job's ranks sent one at a time (each host as it finishes), spread evenly over
    ``spread_s``, to a job opened with its world size: each rank is digested as it arrives,
    so the findings follow the last rank by about one rank's digest and the cross-rank step."""
    from django.core.files import File
    from job_inputs import job_files

    from traces.jobs import arrivals
    from traces.models import Job
    from traces.tasks import trace_queue
    from traces.uploads.sources import Source

    files = job_files(ranks, events, ROOT / "var" / "bench" / "jobs")
    procs = [start_worker(trace_queue(), f"arrive{k}") for k in range(workers)]
    try:
        job = arrivals.open_job(user, len(files), name="arrivals")
        first = time.time()
        for k, path in enumerate(files):
            time.sleep(max(0.0, first + k * spread_s / max(len(files) - 1, 1) - time.time()))
            with path.open("rb") as handle:
                arrivals.accept_rank(Job.objects.get(pk=job.pk), Source.of_file(File(handle, name=path.name)), user)
        last = time.time()
        done = wait_job(job.pk)
    finally:
        stop(procs)
        wipe_redis()  # the ranks' own trace analyses queued after the job's: not measured here
    ready = done.ready_at.timestamp() if done.ready_at else float("nan")
    print(f"arrivals: {ranks} ranks sent one at a time over {last - first:.0f} s, {workers} trace workers: "
          f"last rank in → ready {ready - last:.1f} s (the cross-rank step {done.summary.get('cross_rank_s', 0):.1f} s "
          f"of it); first rank in → ready {ready - first:.1f} s; {done.status}")


def bench_versions(captures: int = 3) -> None:
    from emulator.workloads import graph as workloads
    from emulator.workloads.tracing import capture
    from traces.atrace import operator_breakdown
    from traces.atrace.analysis.paths.tables import step_list
    from traces.atrace.analysis.versions import (
        op_means,
        step_regressions,
        step_time,
        version_regressions,
    )

    gpu = workloads.COST_PROFILES["gpu"]
    workloads.COST_PROFILES["gpu"] = dataclasses.replace(gpu, sw_regressions={**gpu.sw_regressions, "2.2": {"gelu": 2.42}})
    try:
        def record(version, seed, label=None):
            trace = capture("gpu", 0.05, sw_version=version, seed=seed)
            return {"id": seed, "version": label or version, "ops": op_means(operator_breakdown(trace)),
                    **step_time(step_list(trace))}

        slower = [record(v, s) for v in ("2.0", "2.2") for s in range(1, captures + 1)]
        (change,) = step_regressions(slower, version_regressions(slower))
        print(f"versions: 2.0 → 2.2 step {change['delta_pct']:+.2f} % ({change['delta_us']:.1f} µs, noise "
              f"{change['noise_us']:.1f} µs): flagged {change['flagged']}, responsible "
              f"{[r['op'] for r in change['responsible']]}")
        same = [record("2.0", s, "2.0" if s <= captures else "2.0.1") for s in range(1, 2 * captures + 1)]
        (change,) = step_regressions(same, version_regressions(same))
        print(f"versions: two labels of one version: step {change['delta_pct']:+.2f} % (noise {change['noise_us']:.1f} µs): "
              f"flagged {change['flagged']}")
    finally:
        workloads.COST_PROFILES["gpu"] = gpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--only", default="accuracy,latency,scale,arrivals,versions")
    parser.add_argument("--ranks", type=int, default=64)
    parser.add_argument("--events", type=int, default=125_000)
    parser.add_argument("--spread", type=float, default=60.0, help="arrivals: seconds from the first rank to the last")
    args = parser.parse_args()
    sections = set(args.only.split(","))
    if "versions" in sections:
        bench_versions()
    if not sections - {"versions"}:
        return

    workdir = Path(tempfile.mkdtemp(prefix="asicmon-bench-jobs-"))
    django_env(
        EMULATOR_STATE_DIR=workdir / "emulator", TRACE_STORAGE_DIR=workdir / "traces",
        REDIS_KEY_PREFIX=PREFIX, CELERY_QUEUE=PREFIX, FLEET_HOSTS="5", FLEET_DEVICES_PER_HOST="8",
        FLEET_TYPES="gpu", FLEET_SEED="5", POLL_SHARDS="1", LOG_LEVEL="WARNING", TRACE_STORAGE_MAX_GB="50",
        ALLOWED_HOSTS="testserver,127.0.0.1,localhost",
    )
    from django.conf import settings
    from django.contrib.auth.models import User
    from django.test import Client

    from fleet.hosts.emulated_fleet import seed_fleet
    from fleet.roles import ensure_roles

    # Its own throwaway database: never the test suite's, which may be running too.
    settings.DATABASES["default"].setdefault("TEST", {})["NAME"] = f"asicmon_bench_jobs_{os.getpid()}"
    try:
        with throwaway_database():
            try:
                seed_fleet()
                ensure_roles()
                user = User.objects.create_superuser("bench", password="bench-password-123")
                client = Client()
                client.force_login(user)
                Report("Job figures (the machine may be shared and loaded)")
                if "accuracy" in sections:
                    bench_accuracy(user, args.runs, workdir)
                if "latency" in sections:
                    bench_latency(client, workdir)
                if "scale" in sections:
                    bench_scale(user, workdir, args.ranks, args.events)
                if "arrivals" in sections:
                    bench_arrivals(user, args.ranks, args.events, args.spread)
            finally:
                wipe_redis()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

if __name__ == "__main__":
    main()
