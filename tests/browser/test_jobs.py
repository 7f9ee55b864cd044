"""Distributed jobs in a real Chromium against real trace workers: capture from the fleet
page, follow each rank, read the straggler and why; busy and failed ranks; an upload."""

from __future__ import annotations

import contextlib
import io
import json
import shutil

import pytest
from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from tests.support.browser import _on_the_stack, sign_in
from tests.support.jobs import GPU_FLEET, running_job, same_software
from tests.support.traces import real_trace
from traces import writers
from traces.models import Job

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SHARED = ("multirank_sampled_rank0.json.gz", "multirank_sampled_rank1.json.gz", "ddp_nccl_rank0.json.gz")


@pytest.fixture(scope="module")
def stack_settings() -> dict:
    """The module's trace stack polls a fleet of GPU-like devices (jobs run one device type)."""
    return {**GPU_FLEET, "POLL_SHARDS": 1}


@pytest.fixture
def job_stack(module_trace_stack, gpu_fleet, stack_settings, settings, operator) -> str:
    """The module's trace stack on this test's freshly seeded GPU fleet, with no emulator
    state left by an earlier test: its URL."""
    _on_the_stack(module_trace_stack, stack_settings, settings)
    shutil.rmtree(settings.EMULATOR_STATE_DIR, ignore_errors=True)
    return module_trace_stack.url


# The job page reloads itself when the job is done: an element read while it reloads is stale.
RELOADING = (NoSuchElementException, StaleElementReferenceException)


def _wait_ready(browser, timeout=180):
    """Waits for the page the server drew for a finished job (its progress bar hidden), not
    the live page's status text that turns "ready" a moment before the page reloads."""
    wait = WebDriverWait(browser, timeout, poll_frequency=0.2, ignored_exceptions=RELOADING)
    wait.until(lambda b: b.find_element(By.ID, "job-pending").get_attribute("hidden") is not None)
    return browser.find_element(By.ID, "job-status").text.lower()


def test_operator_captures_a_job_from_the_fleet_page_and_reads_why_a_device_held_it_up(browser, gpu_fleet, job_stack):
    devices = same_software(gpu_fleet, 4)
    victim = devices[1]
    running_job(devices, "overheat", victim)
    sign_in(browser, job_stack, "otto")
    browser.get(f"{job_stack}/")
    wait = WebDriverWait(browser, 60, poll_frequency=0.1, ignored_exceptions=RELOADING)
    for d in devices:
        browser.find_element(By.CSS_SELECTOR, f'input.job-pick[value="{d.pk}"]').click()
    assert browser.find_element(By.ID, "job-picked-count").text == "4"
    duration = browser.find_element(By.ID, "job-duration")
    duration.clear()
    duration.send_keys("3")
    browser.find_element(By.ID, "job-name").send_keys("bert-ddp")
    browser.find_element(By.ID, "job-capture-button").click()

    # The job's page opens and follows every rank while it captures.
    wait.until(lambda b: "/traces/jobs/" in b.current_url)
    seen = set()

    def ranks_progress(b):
        for tr in b.find_elements(By.CSS_SELECTOR, "#rank-table tbody tr"):
            text = tr.find_element(By.CSS_SELECTOR, '[data-field="progress"]').text
            if "%" in text and "events" in text:
                seen.add(tr.get_attribute("data-rank"))
        return len(seen) == 4 or b.find_element(By.ID, "job-status").text.lower() == "ready"

    wait.until(ranks_progress)
    assert len(seen) == 4, f"progress seen for ranks {seen}"
    assert _wait_ready(browser) == "ready", browser.find_element(By.ID, "job-error").text

    # The straggler, its cost and the fleet's reason, linked to the device's page.
    heading = browser.find_element(By.CSS_SELECTOR, "#straggler h2").text
    assert heading.startswith("Straggler: rank 1") and victim.serial in heading
    assert "per step" in browser.find_element(By.ID, "straggler-cost").text
    reasons = [li.text for li in browser.find_elements(By.CSS_SELECTOR, "#straggler-reasons li")]
    assert any(r.startswith("Throttled") for r in reasons), reasons
    assert browser.find_element(By.CSS_SELECTOR, '#rank-table tr[data-rank="1"]').get_attribute("class") == "straggler"
    wait.until(lambda b: b.find_element(By.ID, "job-timeline").get_attribute("data-collectives"))
    assert int(browser.find_element(By.ID, "job-timeline").get_attribute("data-path-segments")) > 0
    browser.find_element(By.ID, "straggler-device").click()
    wait.until(lambda b: f"/devices/{victim.pk}/" in b.current_url)
    listed = browser.find_element(By.ID, "device-straggler-jobs").text
    assert "bert-ddp" in listed and "was the straggler of 1" in listed


def test_a_busy_device_and_a_hung_one_are_reported_and_the_others_complete(browser, gpu_fleet, job_stack, operator):
    devices = same_software(gpu_fleet, 4)
    running_job(devices, "hang", devices[3])
    busy = writers.request_capture(devices[2], operator, 30)  # holds its device for the whole job
    sign_in(browser, job_stack, "otto")
    browser.get(f"{job_stack}/")
    for d in devices:
        browser.find_element(By.CSS_SELECTOR, f'input.job-pick[value="{d.pk}"]').click()
    duration = browser.find_element(By.ID, "job-duration")
    duration.clear()
    duration.send_keys("2")
    browser.find_element(By.ID, "job-capture-button").click()
    WebDriverWait(browser, 60).until(lambda b: "/traces/jobs/" in b.current_url)
    assert _wait_ready(browser) == "ready", browser.find_element(By.ID, "job-error").text

    def rank_row(rank):
        return browser.find_element(By.CSS_SELECTOR, f'#rank-table tr[data-rank="{rank}"]')

    assert "busy" in rank_row(2).find_element(By.CSS_SELECTOR, '[data-field="status"]').text.lower()
    assert f"trace {busy.pk}" in rank_row(2).text
    assert "failed" in rank_row(3).find_element(By.CSS_SELECTOR, '[data-field="status"]').text.lower()
    assert "stopped answering" in rank_row(3).text
    for rank in (0, 1):
        assert "ready" in rank_row(rank).find_element(By.CSS_SELECTOR, '[data-field="status"]').text.lower()
    job = Job.objects.get()
    assert job.summary["ranks_busy"] == 1 and job.summary["ranks_failed"] == 1 and job.summary["ranks_ready"] == 2


def test_an_uploaded_job_reads_back_the_command_line_collectives_and_communication_share(browser, job_stack):
    from traces.atrace.cli import main

    paths = [real_trace(name) for name in SHARED]
    sign_in(browser, job_stack, "otto")
    browser.get(f"{job_stack}/traces/jobs/")
    browser.find_element(By.ID, "job-files").send_keys("\n".join(str(p) for p in paths))
    browser.find_element(By.ID, "job-upload-submit").click()
    WebDriverWait(browser, 60).until(lambda b: "/traces/jobs/" in b.current_url and b.current_url.rstrip("/")[-1].isdigit())
    assert _wait_ready(browser) == "ready", browser.find_element(By.ID, "job-error").text

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["job", *[str(p) for p in sorted(paths, key=lambda p: p.name)], "--json"]) == 0
    cli = json.loads(out.getvalue())
    shown = browser.find_element(By.ID, "collectives-matched").get_attribute("data-count")
    assert int(shown) == cli["collectives_matched"] > 0
    rows = browser.find_elements(By.CSS_SELECTOR, "#rank-table tbody tr")
    assert [float(tr.get_attribute("data-comm-share")) for tr in rows] == [r["communication"]["communication"] for r in cli["per_rank"]]
    assert [tr.get_attribute("data-file") for tr in rows] == [r["file"] for r in cli["per_rank"]]
    ddp = next(tr for tr in rows if tr.get_attribute("data-file") == "ddp_nccl_rank0.json.gz")
    assert float(ddp.get_attribute("data-comm-share")) == pytest.approx(0.28, abs=0.01)  # the README's figure


def test_ranks_sent_one_at_a_time_appear_on_the_job_page_as_they_arrive(browser, job_stack, operator):
    from django.core.files.uploadedfile import SimpleUploadedFile

    from traces.jobs import arrivals
    from traces.uploads.sources import Source

    job = arrivals.open_job(operator, 2, name="two hosts")
    sign_in(browser, job_stack, "otto")
    browser.get(f"{job_stack}/traces/jobs/{job.pk}/")
    assert browser.find_element(By.ID, "job-arrived").text == "0"
    assert not browser.find_elements(By.CSS_SELECTOR, "#rank-table tbody tr")

    def send(name):
        arrivals.accept_rank(Job.objects.get(pk=job.pk), Source.of_file(
            SimpleUploadedFile(name, real_trace(name).read_bytes())), operator)

    send(SHARED[1])  # rank 1 first: its host finished first
    wait = WebDriverWait(browser, 60, poll_frequency=0.2, ignored_exceptions=RELOADING)
    wait.until(lambda b: b.find_element(By.ID, "job-arrived").text == "1")
    row = browser.find_element(By.CSS_SELECTOR, '#rank-table tbody tr[data-rank="1"]')
    wait.until(lambda b: row.find_element(By.CSS_SELECTOR, '[data-field="status"]').text == "ready")
    # Rank 0 is still to come. (The page may have joined the job's group after the job moved
    # on: it reads the job's state once when its socket opens.)
    wait.until(lambda b: b.find_element(By.ID, "job-status").text.lower() == "analysing")
    send(SHARED[0])
    assert _wait_ready(browser) == "ready", browser.find_element(By.ID, "job-error").text
    rows = browser.find_elements(By.CSS_SELECTOR, "#rank-table tbody tr")
    assert [tr.get_attribute("data-rank") for tr in rows] == ["0", "1"]
    assert int(browser.find_element(By.ID, "collectives-matched").get_attribute("data-count")) > 0
