"""Traces in an object store against the local folder: a large upload through Daphne, and
the analysis of a 1M-event trace.

    .venv/bin/python benchmarks/bench_object_store.py [--mb 1024] [--events 1000000] [--runs 3] [--resumable]

Starts moto's S3 server (an S3 API process; it keeps objects in memory) and, for the local
folder and then the object store (TRACE_STORAGE=s3://…), a Daphne as `make run` starts it,
on a throwaway database of the one DATABASE_URL names. Prints, for each:

0. moto's own ingest rate: ``--mb`` MB sent by boto3 straight to it in 8 MB parts, 1, 2
   and 4 at once (the floor of any upload to it on this machine);
1. a ``--mb`` MB Kineto trace uploaded as one multipart POST (with ``--resumable``, first
   through the resumable API in 16 MB chunks too): the time of each and the web process's
   peak RSS (VmHWM; a fresh web process for each run and storage);
2. the worker's analysis (writers.analyse: read, breakdown, results, page analyses) of a
   ``--events`` trace stored there: its time.
Each ``--runs`` times, local folder and object store in turn; the medians last, with the
load average. The object store here is on the same machine.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from harness import (
    CREDENTIALS,
    PHASES,
    Report,
    free_port,
    load_average,
    median,
    peak_rss_mb,
    send_chunked,
    send_plain,
    start_moto,
    start_web,
    throwaway_database,
)


def upload_through_web(label: str, env: dict, path: Path, token: str, resumable: bool) -> dict:
    """One run on a fresh web process: {how: seconds}, its idle and peak RSS (MB)."""
    web, url = start_web(**env)
    try:
        time.sleep(1)
        idle = peak_rss_mb(web.proc.pid)
        size_mb = path.stat().st_size / (1 << 20)
        took, peaks = {}, {}
        for how, send in (("resumable", send_chunked), ("POST", send_plain)):
            if how == "resumable" and not resumable:
                continue
            started = time.perf_counter()
            status, text, _trace_id = send(url, token, path)
            took[how] = time.perf_counter() - started
            assert status == 201, (how, status, text)
            peaks[how] = peak_rss_mb(web.proc.pid)
            if how == "resumable":  # its chunks, then the trace made of them (a join inside an object store)
                took |= {"chunks": PHASES["chunks"], "join": PHASES["make"]}
        peak = peak_rss_mb(web.proc.pid)
        print(f"  {label}: {size_mb:.0f} MB " + ", ".join(f"{how} {t:.1f} s ({size_mb / t:.0f} MB/s)" for how, t in took.items())
              + f"; web RSS {idle:.0f} MB idle, peak " + ", ".join(f"{p:.0f} MB after {how}" for how, p in peaks.items())
              + f"; load average {load_average()}", flush=True)
        return {**took, "idle": idle, "peak": peak}
    finally:
        web.stop()


def moto_ingest(endpoint: str, mb: int, threads: int) -> float:
    """Seconds for boto3 to put ``mb`` MB into moto in 8 MB parts, ``threads`` at once."""
    import boto3
    from botocore.config import Config

    client = boto3.client("s3", endpoint_url=endpoint, config=Config(request_checksum_calculation="when_required"))
    part, key = os.urandom(8 << 20), f"floor-{threads}"
    started = time.perf_counter()
    upload = client.create_multipart_upload(Bucket="bench-traces", Key=key)["UploadId"]

    def send(number: int) -> dict:
        answer = client.upload_part(Bucket="bench-traces", Key=key, UploadId=upload, PartNumber=number, Body=part)
        return {"PartNumber": number, "ETag": answer["ETag"]}

    with ThreadPoolExecutor(threads) as pool:
        parts = list(pool.map(send, range(1, mb // 8 + 1)))
    client.complete_multipart_upload(Bucket="bench-traces", Key=key, UploadId=upload, MultipartUpload={"Parts": parts})
    took = time.perf_counter() - started
    client.delete_object(Bucket="bench-traces", Key=key)
    return took


def medians(label: str, runs: list[dict], unit: str = "s") -> str:
    keys = runs[0].keys()
    return f"  {label}: " + ", ".join(f"{k} {median(r[k] for r in runs):.1f}{' MB' if k in ('idle', 'peak') else ' ' + unit}"
                                      for k in keys)


def analysis_time(storage_config: dict, path: Path, user) -> float:
    from django.core.files.uploadedfile import SimpleUploadedFile  # noqa: F401
    from django.test.utils import override_settings

    from traces import writers
    from traces.models import Trace
    from traces.uploads.sources import Source

    with override_settings(STORAGES={**_storages(), "traces": storage_config}):
        source = Source(path.name, path.stat().st_size, lambda: path.open("rb"))
        trace = writers.accept_upload(source, user)
        started = time.perf_counter()
        writers.analyse(trace.pk)
        took = time.perf_counter() - started
        trace = Trace.objects.get(pk=trace.pk)
        assert trace.status == "ready", trace.error
        return took


def _storages() -> dict:
    from django.conf import settings

    return settings.STORAGES


def main() -> None:  # noqa: PLR0915
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=1024)
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--resumable", action="store_true", help="time the resumable API's upload too")
    parser.add_argument("--skip-upload", action="store_true")
    parser.add_argument("--skip-analysis", action="store_true")
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="asicmon-bench-s3-"))
    port = free_port()
    moto = start_moto(port)
    endpoint = f"http://127.0.0.1:{port}"
    os.environ.update(
        TRACE_STORAGE_DIR=str(workdir / "traces"), EMULATOR_STATE_DIR=str(workdir / "emulator"),
        REDIS_KEY_PREFIX="asicmon-bench-s3", CELERY_QUEUE="asicmon-bench-s3", LOG_LEVEL="WARNING",
        TRACE_STORAGE_MAX_GB="100", TRACE_UPLOAD_MAX_MB=str(args.mb * 2), TRACE_PARSE_MAX_MB="100000",
        FLEET_HOSTS="1", FLEET_DEVICES_PER_HOST="3", ALLOWED_HOSTS="testserver,127.0.0.1,localhost",
        **CREDENTIALS,
    )
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dashboard.settings")
    import boto3
    import django

    django.setup()
    from django.contrib.auth.models import Group, User
    from rest_framework.authtoken.models import Token

    from dashboard.settings import trace_storage
    from fleet.roles import ensure_roles
    from tests.support.tracegen import write_kineto_trace

    boto3.client("s3", endpoint_url=endpoint).create_bucket(Bucket="bench-traces")
    s3_env = {"TRACE_STORAGE": "s3://bench-traces/t", "AWS_S3_ENDPOINT_URL": endpoint, **CREDENTIALS}
    try:
        with throwaway_database():
            ensure_roles()
            user = User.objects.create_user("operator", password="bench-password-123")
            user.groups.add(*Group.objects.filter(name__in=["viewers", "operators"]))
            token = Token.objects.create(user=user).key
            Report(f"moto_server at {endpoint} (same machine)")
            loads = [os.getloadavg()[0]]
            floor = {t: [] for t in (1, 2, 4)}
            uploads = {"local folder": [], "object store": []}
            if not args.skip_upload:
                big = workdir / "big.trace.json"
                write_kineto_trace(big, int(args.mb * (1 << 20) / 270), seed=11)
                print(f"0./1. moto's ingest, and the upload of a {big.stat().st_size / (1 << 20):.0f} MB trace through Daphne:", flush=True)
                for _run in range(args.runs):
                    for threads in floor:
                        floor[threads].append(moto_ingest(endpoint, args.mb, threads))
                    print("  moto ingest (boto3 straight to it): " + ", ".join(
                        f"{t} at once {floor[t][-1]:.1f} s ({args.mb / floor[t][-1]:.0f} MB/s)" for t in floor), flush=True)
                    uploads["local folder"].append(upload_through_web(
                        "local folder", {"TRACE_STORAGE_DIR": workdir / "traces", "TMPDIR": workdir}, big, token, args.resumable))
                    uploads["object store"].append(upload_through_web(
                        "object store", {**s3_env, "TMPDIR": workdir}, big, token, args.resumable))
                    loads.append(os.getloadavg()[0])
                big.unlink()
            analyses = {"local folder": [], "object store": []}
            if not args.skip_analysis:
                trace = workdir / "m.trace.json"
                count = write_kineto_trace(trace, args.events, seed=5)
                print(f"2. analysis of a {count:,}-event trace ({trace.stat().st_size / 1e6:.0f} MB):", flush=True)
                s3 = trace_storage("s3://bench-traces/a")
                s3["OPTIONS"]["endpoint_url"] = endpoint
                local = {"BACKEND": "django.core.files.storage.FileSystemStorage", "OPTIONS": {"location": str(workdir / "a")}}
                for _run in range(args.runs):
                    for label, config in (("local folder", local), ("object store", s3)):
                        analyses[label].append(analysis_time(config, trace, user))
                        print(f"  {label}: {analyses[label][-1]:.1f} s; load average {load_average()}", flush=True)
                    loads.append(os.getloadavg()[0])
            print(f"Medians of {args.runs} runs (load average 1 min over the runs: {min(loads):.1f}-{max(loads):.1f}, "
                  f"median {median(loads):.1f}):")
            if floor[1]:
                print("  moto ingest: " + ", ".join(f"{t} at once {median(v):.1f} s" for t, v in floor.items()))
                for label, runs in uploads.items():
                    print(medians(label, runs))
                ratio = median(r["POST"] for r in uploads["object store"]) / median(
                    r["POST"] for r in uploads["local folder"])
                print(f"  POST object store / local folder: {ratio:.2f}x")
            if analyses["local folder"]:
                local_s, s3_s = (median(v) for v in analyses.values())
                print(f"  analysis: local folder {local_s:.1f} s, object store {s3_s:.1f} s ({s3_s / local_s:.2f}x)")
    finally:
        moto.terminate()
        moto.wait()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
