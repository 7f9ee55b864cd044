"""The OTLP receiver and the request view on one web process.

    .venv/bin/python benchmarks/bench_otlp.py [--seconds 20] [--clients 4] [--batch 512]

Runs against the database and Redis that the environment names (DATABASE_URL, REDIS_URL),
on a throwaway database, with one Daphne as `make run` starts it.

1. Receiver: ``--clients`` threads post OTLP/HTTP protobuf bodies of ``--batch`` spans each
   (gzipped, as the SDK's exporter sends them; spans of serving requests with their
   attributes, new trace ids in every body) for ``--seconds``; prints the spans accepted a second
   and, meanwhile, the latency of a page (the traces catalogue) against the same page idle.
2. The request view: an emulated serving run (``--requests`` requests) is uploaded,
   analysed and joined; then its slowest request's page and the API answer its script
   draws from are fetched ``--repeat`` times each; prints their median and worst times.
"""

from __future__ import annotations

import argparse
import gzip
import os
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

from harness import django_env, median, throwaway_database

TOKEN = "bench-otlp-token"
PASSWORD = "bench-password-123"


def bodies(batch: int, count: int) -> list[bytes]:
    """``count`` gzipped protobuf bodies of ``batch`` spans each, made by the SDK and its
    encoder: 40 batches of a serving run's spans, then copies of them with fresh trace ids
    (every body holds spans not sent before)."""
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    from emulator.serving.engine import ServingConfig
    from emulator.serving.spans import emit_run, memory_provider, resource_for
    from emulator.serving.trace import serve

    _, run = serve(batch * 40 / 4 / 20.0 + 1, ServingConfig(seed=5))
    provider, exporter = memory_provider(resource_for("bench-host", "ENX-BENCH"))
    emit_run(provider.get_tracer("bench"), run)
    spans = exporter.get_finished_spans()
    messages = [encode_spans(spans[i : i + batch]) for i in range(0, len(spans) - batch + 1, batch)][:40]
    out = []
    for k in range(count):
        message = messages[k % len(messages)]
        for resource_spans in message.resource_spans:
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    span.trace_id = k.to_bytes(4, "big") + span.trace_id[4:]
        out.append(gzip.compress(message.SerializeToString(), compresslevel=1))
    return out


def post(url: str, body: bytes) -> int:
    request = urllib.request.Request(url, data=body, method="POST", headers={
        "Content-Type": "application/x-protobuf", "Content-Encoding": "gzip", "Authorization": f"Bearer {TOKEN}"})
    with urllib.request.urlopen(request, timeout=30) as response:
        response.read()
        return response.status


def page_ms(opener, url: str, n: int = 10) -> list[float]:
    times = []
    for _ in range(n):
        t = time.perf_counter()
        with opener.open(url, timeout=30) as response:
            response.read()
        times.append((time.perf_counter() - t) * 1000)
    return times


def signed_in(base: str):
    import http.cookiejar
    import re
    from urllib.parse import urlencode

    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    page = opener.open(f"{base}/accounts/login/").read().decode()
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)
    data = urlencode({"username": "bench", "password": PASSWORD, "csrfmiddlewaretoken": token}).encode()
    opener.open(urllib.request.Request(f"{base}/accounts/login/", data=data, headers={"Referer": f"{base}/accounts/login/"}))
    return opener


def receiver(base: str, opener, seconds: float, clients: int, batch: int) -> None:
    from traces.requests.models import RequestSpan

    prepared = bodies(batch, int(seconds * 60_000 / batch) + clients)  # enough for 60,000 spans/s: the clients never run short
    idle = page_ms(opener, f"{base}/traces/")
    sent = [0] * clients
    stop = time.time() + seconds
    base_count = RequestSpan.objects.count()

    def client(k: int) -> None:
        i = k
        while time.time() < stop and i < len(prepared):
            assert post(f"{base}/v1/traces", prepared[i]) == 200
            sent[k] += batch
            i += clients

    threads = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
    started = time.time()
    for t in threads:
        t.start()
    time.sleep(min(2.0, seconds / 4))
    loaded = page_ms(opener, f"{base}/traces/")
    for t in threads:
        t.join()
    elapsed = time.time() - started
    stored = RequestSpan.objects.count() - base_count
    print(f"receiver: {sum(sent):,} spans posted in {elapsed:.1f} s by {clients} clients, batches of {batch}: "
          f"{sum(sent) / elapsed:,.0f} spans/s accepted and stored ({stored:,} rows)")
    print(f"  traces catalogue meanwhile: median {median(loaded):.0f} ms (idle {median(idle):.0f} ms), "
          f"worst {max(loaded):.0f} ms")


def request_view(base: str, opener, user, n_requests: int, repeat: int, workdir: Path) -> None:
    from django.core.files.uploadedfile import SimpleUploadedFile

    from emulator.serving.engine import ServingConfig
    from emulator.serving.spans import emit_run, memory_provider, resource_for, write_otlp_json
    from emulator.serving.trace import serve
    from traces import writers
    from traces.atrace import chrome_trace_bytes
    from traces.requests import service

    trace, run = serve(n_requests / 30.0, ServingConfig(rate_per_s=30.0, max_batch=64, seed=3))
    provider, exporter = memory_provider(resource_for("bench-host", "ENX-BENCH"))
    emit_run(provider.get_tracer("bench"), run)
    spans = workdir / "spans.jsonl"
    write_otlp_json(exporter.get_finished_spans(), spans)
    row = writers.accept_upload(SimpleUploadedFile("serving.json", chrome_trace_bytes(trace)), user, name="serving")
    t = time.perf_counter()
    writers.analyse(row.pk)
    analysed = time.perf_counter() - t
    row.refresh_from_db()
    service.upload_spans(row, SimpleUploadedFile("spans.jsonl", spans.read_bytes()))
    t = time.perf_counter()
    service.join_requests(row.pk)
    joined = time.perf_counter() - t
    doc = service.stored_join(row)
    rid = doc["worst"][0]["request_id"]
    print(f"request view: {doc['requests']:,} requests, a trace of {row.events:,} events (analysed in {analysed:.1f} s, "
          f"joined in {joined:.1f} s in the worker)")
    for label, url in (("requests page", f"{base}/traces/{row.pk}/requests/"),
                       ("request page", f"{base}/traces/{row.pk}/requests/{rid}/"),
                       ("request API (spans + timeline)", f"{base}/api/traces/{row.pk}/requests/{rid}/?width_px=1200")):
        times = page_ms(opener, url, repeat)
        print(f"  {label}: median {median(times):.0f} ms, worst {max(times):.0f} ms over {repeat}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--batch", type=int, default=512)
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="asicmon-bench-otlp-"))
    os.environ.update(
        EMULATOR_STATE_DIR=str(workdir / "emulator"), TRACE_STORAGE_DIR=str(workdir / "traces"),
        REDIS_KEY_PREFIX="asicmon-bench-otlp", CELERY_QUEUE="asicmon-bench-otlp", FLEET_HOSTS="1",
        FLEET_DEVICES_PER_HOST="3", LOG_LEVEL="WARNING", OTLP_TOKEN=TOKEN,
        ALLOWED_HOSTS="testserver,127.0.0.1,localhost",
    )
    django_env()
    from django.contrib.auth.models import User

    from fleet.roles import ensure_roles
    from tests.support.processes import child_env, start_web

    web = None
    with throwaway_database():
        try:
            ensure_roles()
            user = User.objects.create_superuser("bench", password=PASSWORD)
            web, base = start_web(child_env(TRACE_STORAGE_DIR=workdir / "traces", OTLP_TOKEN=TOKEN))
            opener = signed_in(base)
            receiver(base, opener, args.seconds, args.clients, args.batch)
            request_view(base, opener, user, args.requests, args.repeat, workdir)
        finally:
            if web is not None:
                web.stop()


if __name__ == "__main__":
    main()
