"""Traces in an object store against the local folder: a large upload through Daphne, and
the analysis of a 1M-event trace.

    .venv/bin/python benchmarks/bench_object_store.py [--mb 1024] [--events 1000000]

Starts moto's S3 server (an S3 API process; it keeps objects in memory) and, for the local
folder and then the object store (TRACE_STORAGE=s3://…), a Daphne as `make run` starts it,
on a throwaway database of the one DATABASE_URL names. Prints, for each:

1. a ``--mb`` MB Kineto trace uploaded through the resumable API (16 MB chunks) and then as
   one multipart POST: the time of each and the web process's peak RSS (VmHWM) over both;
2. the worker's analysis (writers.analyse: read, breakdown, results, page analyses) of a
   ``--events`` trace stored there: its time.
Say how loaded the machine was; the object store here is on the same machine.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_uploads import send_chunked, send_plain  # noqa: E402

CREDENTIALS = {"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench-secret", "AWS_DEFAULT_REGION": "us-east-1"}


def start_moto(port: int) -> subprocess.Popen:
    proc = subprocess.Popen([str(Path(sys.executable).parent / "moto_server"), "-H", "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={**os.environ, **CREDENTIALS})
    for _ in range(100):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/moto-api/", timeout=1).close()
            return proc
        except OSError:
            time.sleep(0.1)
    raise RuntimeError("moto_server did not start")


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def upload_through_web(label: str, env: dict, path: Path, token: str) -> None:
    from tests.support.processes import child_env, start_web

    web, url = start_web(child_env(**env))
    try:
        time.sleep(1)
        before = peak_rss_mb(web.proc.pid)
        size_mb = path.stat().st_size / (1 << 20)
        took = {}
        for how, send in (("resumable", send_chunked), ("multipart POST", send_plain)):
            started = time.perf_counter()
            status, text, _trace_id = send(url, token, path)
            took[how] = time.perf_counter() - started
            assert status == 201, (how, status, text)
        print(f"  {label}: {size_mb:.0f} MB resumable {took['resumable']:.1f} s "
              f"({size_mb / took['resumable']:.0f} MB/s), multipart POST {took['multipart POST']:.1f} s; "
              f"web peak RSS {before:.0f} MB idle, {peak_rss_mb(web.proc.pid):.0f} MB after both", flush=True)
    finally:
        web.stop()


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
    args = parser.parse_args()
    from tests.support.processes import free_port

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
    from django.test.utils import setup_databases, teardown_databases
    from rest_framework.authtoken.models import Token

    from dashboard.settings import trace_storage
    from fleet.roles import ensure_roles
    from tests.support.tracegen import write_kineto_trace

    boto3.client("s3", endpoint_url=endpoint).create_bucket(Bucket="bench-traces")
    s3_env = {"TRACE_STORAGE": "s3://bench-traces/t", "AWS_S3_ENDPOINT_URL": endpoint, **CREDENTIALS}
    old = setup_databases(verbosity=0, interactive=False)
    try:
        ensure_roles()
        user = User.objects.create_user("operator", password="bench-password-123")
        user.groups.add(*Group.objects.filter(name__in=["viewers", "operators"]))
        token = Token.objects.create(user=user).key
        print(f"{os.cpu_count()} CPUs; load {os.getloadavg()[0]:.1f}; moto_server at {endpoint} (same machine)")
        big = workdir / "big.trace.json"
        write_kineto_trace(big, int(args.mb * (1 << 20) / 270), seed=11)
        print(f"1. upload of a {big.stat().st_size / (1 << 20):.0f} MB trace through Daphne:", flush=True)
        upload_through_web("local folder", {"TRACE_STORAGE_DIR": workdir / "traces", "TMPDIR": workdir}, big, token)
        upload_through_web("object store", {**s3_env, "TMPDIR": workdir}, big, token)
        big.unlink()
        trace = workdir / "m.trace.json"
        count = write_kineto_trace(trace, args.events, seed=5)
        print(f"2. analysis of a {count:,}-event trace ({trace.stat().st_size / 1e6:.0f} MB):", flush=True)
        s3 = trace_storage("s3://bench-traces/a")
        s3["OPTIONS"]["endpoint_url"] = endpoint
        local = {"BACKEND": "django.core.files.storage.FileSystemStorage", "OPTIONS": {"location": str(workdir / "a")}}
        for label, config in (("local folder", local), ("object store", s3), ("local folder", local), ("object store", s3)):
            print(f"  {label}: {analysis_time(config, trace, user):.1f} s", flush=True)
    finally:
        teardown_databases(old, verbosity=0)
        moto.terminate()
        moto.wait()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
