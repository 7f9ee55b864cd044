"""The findings panel in a real Chromium, through the real stack (traces worker, Daphne): the
verdict and the findings at the top of the trace page, and a finding's link opening the
timeline at its evidence with its events highlighted and the breakdown filtered to its
operators. End to end: a live emulated capture with an injected input stall gets that
finding."""

import time

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from tests.support.browser import sign_in
from tests.support.traces import real_trace
from traces import writers
from traces.models import Trace
from traces.store import page_data

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _ready(trace: Trace, timeout=120) -> Trace:
    deadline = time.time() + timeout
    while time.time() < deadline:
        trace.refresh_from_db()
        if trace.status in ("ready", "failed"):
            break
        time.sleep(0.3)
    assert trace.status == "ready", (trace.status, trace.error)
    return trace


def _attr(browser, element_id, name):
    return browser.find_element(By.ID, element_id).get_attribute(name)


def _open_findings(browser, url, trace):
    browser.get(f"{url}/traces/{trace.pk}/")
    wait = WebDriverWait(browser, 60, poll_frequency=0.1)
    wait.until(lambda b: _attr(b, "findings-card", "data-loaded") == "1")
    return wait


def _show_evidence(browser, wait, rule):
    """Click the finding's link; returns the finding as the API gives it."""
    item = browser.find_element(By.CSS_SELECTOR, f'#findings-list li[data-rule="{rule}"]')
    item.find_element(By.CSS_SELECTOR, "a.finding-show").click()
    wait.until(lambda b: _attr(b, "timeline-chart", "data-evidence") == rule)


def test_the_panel_shows_the_verdict_and_a_click_opens_the_evidence(browser, trace_stack, operator):
    path = real_trace("h100_bert_infer.json.gz")
    trace = _ready(writers.accept_upload(SimpleUploadedFile(path.name, path.read_bytes()), operator))
    sign_in(browser, trace_stack, "otto")
    wait = _open_findings(browser, trace_stack, trace)

    # The panel is at the top: above the breakdown, the verdict first.
    card, results = browser.find_element(By.ID, "findings-card"), browser.find_element(By.ID, "trace-results")
    assert card.location["y"] < results.location["y"]
    assert _attr(browser, "findings-card", "data-verdict") == "host-bound"
    assert browser.find_element(By.ID, "findings-verdict").text.startswith("Host-bound")
    items = browser.find_elements(By.CSS_SELECTOR, "#findings-list li")
    assert items[0].get_attribute("data-rule") == "launch_bound"
    assert "Launch-bound" in items[0].text and "Saves up to" in items[0].text and "Next:" in items[0].text

    finding = page_data.findings(trace, {"rule": "launch_bound"})["findings"][0]
    _show_evidence(browser, wait, "launch_bound")
    chart = browser.find_element(By.ID, "timeline-chart")
    start, end = float(chart.get_attribute("data-window-start-us")), float(chart.get_attribute("data-window-end-us"))
    assert (start, end) == pytest.approx(tuple(finding["evidence"]["focus_us"]), abs=1)
    assert int(chart.get_attribute("data-highlighted")) > 0
    assert chart.find_elements(By.CSS_SELECTOR, "g.trace.bars path[style*='rgb(255, 127, 14)']")  # orange bars
    # The breakdown shows the finding's operators only, on their side.
    wait.until(lambda b: _attr(b, "breakdown-table", "data-filtered") == "1")
    ops = {o["op"] for o in finding["evidence"]["operators"]}
    wait.until(lambda b: {r.get_attribute("data-op") for r in b.find_elements(By.CSS_SELECTOR, "#breakdown-table tbody tr")} <= ops)
    shown = {r.get_attribute("data-op") for r in browser.find_elements(By.CSS_SELECTOR, "#breakdown-table tbody tr")}
    assert shown and shown <= ops
    note = browser.find_element(By.ID, "breakdown-filter")
    assert note.is_displayed() and "finding's operators" in note.text
    note.find_element(By.TAG_NAME, "a").click()  # back to every operator
    wait.until(lambda b: not _attr(b, "breakdown-table", "data-filtered"))
    assert len(browser.find_elements(By.CSS_SELECTOR, "#breakdown-table tbody tr")) > len(shown)


def test_a_live_capture_with_an_input_stall_gets_the_finding(browser, trace_stack, operator, seeded_fleet):
    """The page is open while the device is captured: the panel is drawn when the trace
    becomes ready (fetched, not drawn with the page)."""
    device = next(d for d in seeded_fleet if d.device_type == "gpu")
    sign_in(browser, trace_stack, "otto")
    trace = writers.request_capture(device, operator, 4, problems=["input_stall"])
    browser.get(f"{trace_stack}/traces/{trace.pk}/")
    assert _attr(browser, "trace", "data-status") != "ready"
    wait = WebDriverWait(browser, 120, poll_frequency=0.1)
    wait.until(lambda b: _attr(b, "findings-card", "data-loaded") == "1")
    assert not browser.find_elements(By.ID, "findings-data")  # drawn by the page's script
    trace = _ready(trace)
    rules = [li.get_attribute("data-rule") for li in browser.find_elements(By.CSS_SELECTOR, "#findings-list li")]
    assert "input_stall" in rules
    stall = page_data.findings(trace, {"rule": "input_stall"})["findings"][0]
    assert stall["saving_per_step_us"] == pytest.approx(300, rel=0.1)  # the emulator's 300 µs in the loader
    _show_evidence(browser, wait, "input_stall")
    chart = browser.find_element(By.ID, "timeline-chart")
    start = float(chart.get_attribute("data-window-start-us"))
    assert start == pytest.approx(stall["evidence"]["focus_us"][0], abs=1)
