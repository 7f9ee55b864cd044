"""The trace page in a real Chromium: first paint at a million events, and capture click → progress.

    .venv/bin/python benchmarks/bench_trace_page.py [--events 1000000] [--repeat 5]

Runs against the database and Redis that the environment names (DATABASE_URL, REDIS_URL),
on a throwaway database, with Daphne and a trace worker as `make run` starts them, and
Debian's headless Chromium (`make browser-deps`). It uploads a generated Kineto trace of
about ``--events`` events, analyses it, then opens its page ``--repeat`` times (the first
with an empty cache) and prints, from the page's Performance API, in ms since navigation
start: first contentful paint, DOMContentLoaded, the findings panel drawn
(``findings-drawn`` mark, and how long after DOMContentLoaded), the breakdown chart drawn
(``breakdown-drawn`` mark), the timeline drawn and every view drawn. Then it clicks Capture
on a device page and prints the time from the click to the first progress shown
(``capture-clicked`` → ``capture-first-progress`` marks). Say how loaded the machine was.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

from harness import Report, median, seeded_superuser, throwaway_database, trace_env
from harness.browser import chromium, mark, quit_chromium, sign_in

WRITTEN_PER_EVENT = 1.53  # the generator's flow and metadata records: this many make one read event
PASSWORD = "bench-password-123"
MARKS = ("findings-drawn", "breakdown-drawn", "timeline-drawn", "views-drawn")


def page_load(driver, url: str) -> dict[str, float]:
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get(url)
    WebDriverWait(driver, 120, poll_frequency=0.05).until(
        lambda d: mark(d, "views-drawn") is not None and mark(d, "findings-drawn") is not None)
    timing = driver.execute_script(
        """const paint = performance.getEntriesByName("first-contentful-paint")[0];
        const nav = performance.getEntriesByType("navigation")[0];
        const plotly = performance.getEntriesByType("resource").find((e) => e.name.includes("plotly"));
        return {fcp: paint ? paint.startTime : null, dom: nav.domContentLoadedEventEnd, load: nav.loadEventEnd,
                plotly: plotly ? plotly.responseEnd : null};"""
    )
    out = {**timing, **{m: mark(driver, m) for m in MARKS}}
    out["findings-after-dom"] = out["findings-drawn"] - out["dom"]
    return out


def capture_latency(driver, url: str, device_id: int) -> float:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get(f"{url}/devices/{device_id}/")
    duration = driver.find_element(By.ID, "capture-duration")
    duration.clear()
    duration.send_keys("2")
    driver.find_element(By.ID, "capture-button").click()
    WebDriverWait(driver, 60, poll_frequency=0.02).until(lambda d: mark(d, "capture-first-progress") is not None)
    took = mark(driver, "capture-first-progress") - mark(driver, "capture-clicked")
    WebDriverWait(driver, 120).until(lambda d: "/traces/" in d.current_url)  # ready: its page opens
    return took


def prepare_trace(user, events: int, workdir: Path):
    from django.core.files.uploadedfile import SimpleUploadedFile

    from tests.support.tracegen import write_kineto_trace
    from traces import writers
    from traces.models import Trace

    path = workdir / f"kineto-{events}.json.gz"
    write_kineto_trace(path, int(events * WRITTEN_PER_EVENT), seed=1)
    trace = writers.accept_upload(SimpleUploadedFile(path.name, path.read_bytes()), user)
    t = time.perf_counter()
    writers.analyse(trace.pk)
    trace = Trace.objects.get(pk=trace.pk)
    assert trace.status == "ready", trace.error
    print(f"trace {trace.pk}: {trace.events:,} events, analysed in-process in {time.perf_counter() - t:.1f} s", flush=True)
    return trace


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--no-capture", action="store_true", help="skip the capture click measurement")
    args = parser.parse_args()

    workdir = Path(tempfile.mkdtemp(prefix="asicmon-bench-trace-page-"))
    trace_env(workdir, "asicmon-bench-trace-page")
    from fleet.models import Device
    from tests.support.processes import child_env, start_web, start_worker
    from traces.tasks import trace_queue

    try:
        services_started, driver = [], None
        with throwaway_database():
            try:
                user = seeded_superuser(password=PASSWORD)
                trace = prepare_trace(user, args.events, workdir)
                env = child_env(TRACE_STORAGE_DIR=workdir / "traces")
                web, url = start_web(env)
                services_started.append(web)
                driver = chromium()
                sign_in(driver, url, "bench", PASSWORD)
                Report(f"trace page, {trace.events:,} events (ms since navigation start; run 1 with an empty cache)")
                runs = []
                for k in range(args.repeat):
                    if k == 0:
                        driver.execute_cdp_cmd("Network.clearBrowserCache", {})
                    run = page_load(driver, f"{url}/traces/{trace.pk}/")
                    runs.append(run)
                    print(
                        f"  run {k + 1}: FCP {run['fcp']:.0f}  DOMContentLoaded {run['dom']:.0f}  "
                        f"findings drawn {run['findings-drawn']:.0f} (+{run['findings-after-dom']:.0f} after DOMContentLoaded)  "
                        f"breakdown drawn {run['breakdown-drawn']:.0f}  timeline drawn {run['timeline-drawn']:.0f}  "
                        f"all views drawn {run['views-drawn']:.0f}  (Plotly fetched by {run['plotly'] or 0:.0f})",
                        flush=True,
                    )
                warm = runs[1:] or runs
                print("  median of warm runs: " + ", ".join(
                    f"{key} {median(r[key] for r in warm):.0f}" for key in (
                        "fcp", "findings-drawn", "findings-after-dom", "breakdown-drawn", "timeline-drawn", "views-drawn")
                ))
                if not args.no_capture:
                    worker = start_worker(env, concurrency=1, queue=trace_queue())
                    services_started.append(worker)
                    device = Device.objects.order_by("id").first()
                    took = [capture_latency(driver, url, device.id) for _ in range(2)]
                    print(f"capture click → first progress on screen: {', '.join(f'{t:.0f}' for t in took)} ms")
            finally:
                if driver is not None:
                    quit_chromium(driver)
                for service in reversed(services_started):
                    service.stop()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
