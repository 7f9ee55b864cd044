"""Uploads against a real Daphne: refusals from the headers, and many large uploads at once.

    .venv/bin/python benchmarks/bench_uploads.py [--uploads 50] [--mb 100] [--budget-gb 3] [--object-store]

Runs on a throwaway database of the one the environment names (DATABASE_URL), with Daphne as
`make run` starts it (no trace worker: uploads stay queued), its temporary folder and trace
storage in a folder of their own. Prints:

1. an anonymous 2 GB POST to each upload route: the answer, the time to it, and the bytes
   written meanwhile under the temporary folder and the trace storage (files with a name,
   and the unlinked temporary files Daphne holds open);
2. ``--uploads`` operators sending a ``--mb`` MB Kineto trace each, all at once, half through
   the resumable API (16 MB chunks) and half as one multipart POST, with the trace storage
   budget at ``--budget-gb`` (so that some are refused 507), retrying on 429 as a client
   should; each one's outcome, the upload throughput, and every stored raw file checked
   against the original (size and SHA-256); what is left behind (open uploads, parts,
   temporary files);
3. meanwhile, the trace catalogue page fetched every 100 ms by a signed-in viewer: p50, p95
   and max latency.
With ``--object-store`` the traces go to moto's S3 server started for the run (it keeps
every object in memory: mind ``--uploads`` x ``--mb``), the bytes it holds are counted with
the folders', and the stored traces are read back from it; also the web process's peak RSS.
Say how loaded the machine was.
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import os
import shutil
import tempfile
import threading
import time
from pathlib import Path

from harness import (
    BUSY,
    CREDENTIALS,
    Report,
    django_env,
    free_port,
    load_average,
    median,
    peak_rss_mb,
    percentile,
    send_chunked,
    send_plain,
    signed_in_cookie,
    start_moto,
    start_web,
    throwaway_database,
)


def poll_page(url: str, cookie: str, stop: threading.Event, latencies: list[float]) -> None:
    import requests

    session = requests.Session()
    while not stop.is_set():
        started = time.perf_counter()
        r = session.get(f"{url}/traces/", headers={"Cookie": cookie}, timeout=30)
        latencies.append((time.perf_counter() - started) * 1000)
        assert r.status_code == 200, r.status_code
        stop.wait(0.1)


def page_latencies(url: str, cookie: str, count: int) -> list[float]:
    stop, latencies = threading.Event(), []
    thread = threading.Thread(target=poll_page, args=(url, cookie, stop, latencies), daemon=True)
    thread.start()
    while len(latencies) < count:
        time.sleep(0.05)
    stop.set()
    thread.join()
    return sorted(latencies)


def refusals(port: int, pid: int, folders: list[Path]) -> None:
    from tests.dashboard.gate.test_daphne_gate import _bytes_under, raw_upload

    before = _bytes_under(pid, folders)
    for path in ("/api/traces/", "/api/jobs/"):
        result = raw_upload(port, path, {}, watch=lambda: _bytes_under(pid, folders) - before)
        print(f"  anonymous 2 GB POST {path}: {result['status']} in {result['seconds'] * 1000:.0f} ms, "
              f"{result['written']} bytes written under the temporary folder and the storage "
              f"({result['sent'] >> 20} MB sent before the server closed)", flush=True)


def many_uploads(args, url: str, tokens: list[str], path: Path, cookie: str):
    stop, latencies = threading.Event(), []
    poller = threading.Thread(target=poll_page, args=(url, cookie, stop, latencies), daemon=True)
    poller.start()
    results: list = [None] * args.uploads

    def one(k: int) -> None:
        send = send_chunked if k % 2 == 0 else send_plain
        started = time.perf_counter()
        try:
            results[k] = (send.__name__, *send(url, tokens[k % len(tokens)], path), time.perf_counter() - started)
        except Exception as exc:  # noqa: BLE001 - a client error is an outcome to print
            results[k] = (send.__name__, 0, repr(exc)[:200], None, time.perf_counter() - started)

    started = time.perf_counter()
    threads = [threading.Thread(target=one, args=(k,)) for k in range(args.uploads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    took = time.perf_counter() - started
    stop.set()
    poller.join()
    return results, took, latencies


def check_stored(results, path: Path) -> None:
    from django.core.files.storage import storages

    from traces.models import Trace, Upload

    storage = storages["traces"]
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    ids = [r[3] for r in results if r[3]]
    bad = []
    for trace in Trace.objects.filter(pk__in=ids):
        stored = hashlib.sha256()
        with storage.open(trace.raw_file, "rb") as f:
            while data := f.read(1 << 20):
                stored.update(data)
        if trace.raw_bytes != path.stat().st_size or stored.hexdigest() != digest:
            bad.append(trace.pk)
    rows = Trace.objects.count()
    try:
        folders = storage.listdir("uploads")[0]
    except FileNotFoundError:
        folders = []
    parts = sum(len(storage.listdir(f"uploads/{folder}")[1]) for folder in folders)
    print(f"  stored traces checked: {len(ids)} equal to the original: {len(ids) - len(bad)}; trace rows {rows} "
          f"(answers 201: {len(ids)}); uploads left open {Upload.objects.count()}, parts left {parts}")


def object_store_bytes() -> int:
    """The bytes in the traces' object store (0 for a local folder)."""
    from django.core.files.storage import storages

    storage = storages["traces"]
    if not hasattr(storage, "bucket"):
        return 0
    return sum(o.size for o in storage.bucket.objects.all())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--uploads", type=int, default=50)
    parser.add_argument("--mb", type=int, default=100)
    parser.add_argument("--budget-gb", type=float, default=3.0)
    parser.add_argument("--cap", type=int, default=None, help="TRACE_UPLOADS_MAX_ACTIVE (default: the setting's)")
    parser.add_argument("--object-store", action="store_true", help="traces in moto's S3 server, not a folder")
    args = parser.parse_args()
    if args.cap:
        os.environ["TRACE_UPLOADS_MAX_ACTIVE"] = str(args.cap)
    moto, store_env = None, {}
    if args.object_store:
        import boto3

        port = free_port()
        moto = start_moto(port)
        endpoint = f"http://127.0.0.1:{port}"
        boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id=CREDENTIALS["AWS_ACCESS_KEY_ID"],
                     aws_secret_access_key=CREDENTIALS["AWS_SECRET_ACCESS_KEY"]).create_bucket(Bucket="bench-uploads")
        store_env = {"TRACE_STORAGE": "s3://bench-uploads/t", "AWS_S3_ENDPOINT_URL": endpoint, **CREDENTIALS}
        os.environ.update(store_env)

    workdir = Path(tempfile.mkdtemp(prefix="asicmon-bench-uploads-"))
    (workdir / "tmp").mkdir()
    django_env(
        TRACE_STORAGE_DIR=workdir / "traces", EMULATOR_STATE_DIR=workdir / "emulator",
        REDIS_KEY_PREFIX="asicmon-bench-uploads", CELERY_QUEUE="asicmon-bench-uploads", LOG_LEVEL="WARNING",
        TRACE_STORAGE_MAX_GB=str(args.budget_gb), FLEET_HOSTS="1", FLEET_DEVICES_PER_HOST="3",
        ALLOWED_HOSTS="testserver,127.0.0.1,localhost",
    )
    from django.conf import settings
    from django.contrib.auth.models import Group, User
    from rest_framework.authtoken.models import Token

    from fleet.roles import ensure_roles
    from tests.support.tracegen import write_kineto_trace

    try:
        with throwaway_database():
            web = None
            try:
                ensure_roles()
                tokens = []
                for k in range(5):
                    user = User.objects.create_user(f"operator{k}", password="bench-password-123")
                    user.groups.add(*Group.objects.filter(name__in=["viewers", "operators"]))
                    tokens.append(Token.objects.create(user=user).key)
                viewer = User.objects.create_user("viewer", password="bench-password-123")
                viewer.groups.add(Group.objects.get(name="viewers"))
                cookie = signed_in_cookie(viewer)
                path = workdir / "trace.json"
                write_kineto_trace(path, int(args.mb * (1 << 20) / 270), seed=11)
                size = path.stat().st_size
                web, url = start_web(TMPDIR=workdir / "tmp", TRACE_STORAGE_DIR=workdir / "traces", **store_env)
                port = int(url.rsplit(":", 1)[1])
                folders = [workdir / "tmp", workdir / "traces"]
                Report(f"Daphne, one process; traces in {'moto (S3)' if moto else 'a local folder'}; "
                       f"TRACE_UPLOADS_MAX_ACTIVE={settings.TRACE_UPLOADS_MAX_ACTIVE}, budget {args.budget_gb} GB")
                idle = page_latencies(url, cookie, 30)
                print(f"0. catalogue page, no upload running (30 fetches): p50 {median(idle):.0f} ms, "
                      f"p95 {percentile(idle, 95):.0f} ms")
                print("1. refused from the headers:")
                stored_before = object_store_bytes()
                refusals(port, web.proc.pid, folders)
                if moto:
                    print(f"  bytes added to the object store meanwhile: {object_store_bytes() - stored_before}")
                print(f"2. {args.uploads} operators upload a {size / (1 << 20):.0f} MB trace at once "
                      "(even: resumable API, odd: multipart POST):", flush=True)
                results, took, latencies = many_uploads(args, url, tokens, path, cookie)
                outcomes = collections.Counter((r[0], r[1]) for r in results)
                for (how, status), count in sorted(outcomes.items()):
                    example = next(r[2] for r in results if (r[0], r[1]) == (how, status))
                    print(f"  {how}: {status} x{count}" + ("" if status == 201 else f"  e.g. {example}"))
                print(f"  429 answers, each retried after its Retry-After: {dict(BUSY) or 'none'}")
                stored = sum(1 for r in results if r[1] == 201)
                print(f"  {took:.0f} s for all; {stored * size / (1 << 20) / took:.0f} MB/s stored; "
                      f"load average after {load_average()}")
                check_stored(results, path)
                left = sum(p.stat().st_size for p in (workdir / "tmp").rglob("*") if p.is_file())
                print(f"  temporary files left: {left} bytes; web process peak RSS {peak_rss_mb(web.proc.pid):.0f} MB")
                lat = sorted(latencies)
                print(f"3. catalogue page meanwhile ({len(lat)} fetches): p50 {median(lat):.0f} ms, "
                      f"p95 {percentile(lat, 95):.0f} ms, max {lat[-1]:.0f} ms")
            finally:
                if web is not None:
                    web.stop()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
        if moto is not None:
            moto.terminate()
            moto.wait()


if __name__ == "__main__":
    main()
