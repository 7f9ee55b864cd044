"""The request view in a real Chromium: a serving run's trace and spans, the slowest
requests with their reasons, one request's spans over its engine steps and kernels, and the
way from it to the trace's timeline at its time."""

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from tests.support.browser import sign_in
from tests.support.serving import spans_upload, uploaded_serving_trace
from traces.requests import service

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def joined_trace(trace_stack, operator, tmp_path):
    from django.core.files.uploadedfile import SimpleUploadedFile

    trace, spans, run = uploaded_serving_trace(operator, tmp_path, "throttled", seed=21)
    service.upload_spans(trace, SimpleUploadedFile("spans.jsonl", spans_upload(spans).getvalue()))
    service.join_requests(trace.pk)
    return trace_stack, trace, run


def test_from_the_slowest_request_to_its_kernels_and_the_trace_timeline(browser, joined_trace, viewer):
    url, trace, run = joined_trace
    sign_in(browser, url, viewer.username)
    wait = WebDriverWait(browser, 60, poll_frequency=0.2)
    browser.get(f"{url}/traces/{trace.pk}/")
    browser.find_element(By.ID, "trace-requests-link").click()
    wait.until(lambda b: b.find_elements(By.ID, "worst-table"))
    assert browser.find_element(By.ID, "requests").get_attribute("data-requests") == str(len(run.requests))
    rows = browser.find_elements(By.CSS_SELECTOR, "#worst-table tbody tr")
    assert len(rows) == 10
    first = rows[0]
    assert first.get_attribute("data-cause") == "throttled"
    assert "device throttled: temperature 92 °C" in first.find_element(By.CSS_SELECTOR, ".reason").text
    rid = first.get_attribute("data-request")
    first.find_element(By.TAG_NAME, "a").click()

    wait.until(lambda b: b.find_element(By.ID, "request-chart").get_attribute("data-drawn") == "1")
    chart = browser.find_element(By.ID, "request-chart")
    assert browser.find_element(By.TAG_NAME, "h1").text == f"Request {rid}"
    assert chart.get_attribute("data-spans") == "4"
    assert int(chart.get_attribute("data-bars")) > 10
    assert chart.find_elements(By.CSS_SELECTOR, ".main-svg")
    ticks = " ".join(t.text for t in chart.find_elements(By.CSS_SELECTOR, ".ytick text, .y2tick text"))
    for label in ("llm_request", "decode", "scheduler", "stream 0"):
        assert label in ticks
    assert "device throttled" in browser.find_element(By.ID, "request-reason").text
    elapsed = browser.execute_script(
        "const m = performance.getEntriesByName('request-drawn')[0]; return m ? m.startTime : null;")
    assert elapsed is not None

    # A click on the decode span opens the trace's timeline over the decode.
    spans = {s["name"]: s for s in browser.execute_script(
        "return fetch(arguments[0]).then((r) => r.json()).then((d) => d.spans);",
        browser.find_element(By.ID, "request").get_attribute("data-api-url"))}
    decode = spans["decode"]
    browser.execute_script("""
        const chart = document.getElementById('request-chart');
        const i = chart.data.findIndex((t) => t.name === 'decode');
        chart.emit('plotly_click', {points: [{customdata: chart.data[i].customdata[0]}]});""")
    wait.until(lambda b: b.find_elements(By.ID, "timeline-chart")
               and b.find_element(By.ID, "timeline-chart").get_attribute("data-window-start-us"))
    chart = browser.find_element(By.ID, "timeline-chart")
    offset = int(trace_offset_ns(url, browser, trace.pk))
    assert float(chart.get_attribute("data-window-start-us")) <= (decode["start_ns"] - offset) / 1000
    assert float(chart.get_attribute("data-window-end-us")) >= (decode["end_ns"] - offset) / 1000
    browser.back()
    wait.until(lambda b: b.find_element(By.ID, "request-chart").get_attribute("data-drawn") == "1")

    link = browser.find_element(By.ID, "open-timeline")
    start_us = float(link.get_attribute("href").split("#window=")[1].split(",")[0])
    link.click()
    wait.until(lambda b: b.find_element(By.ID, "timeline-chart").get_attribute("data-window-start-us"))
    shown = float(browser.find_element(By.ID, "timeline-chart").get_attribute("data-window-start-us"))
    assert shown == pytest.approx(start_us, abs=1.0)


def trace_offset_ns(url, browser, trace_id) -> int:
    """The join's clock offset (trace clock + offset = the spans' clock), from the API."""
    return browser.execute_script(
        "return fetch(arguments[0]).then((r) => r.json()).then((d) => d.join.clock_offset_ns);",
        f"{url}/api/traces/{trace_id}/requests/?limit=0")


def test_pages_without_a_live_channel_show_no_live_pill_and_the_request_axis_its_unit(browser, joined_trace, viewer):
    """The top bar's live pill said "connecting…" forever on pages that open no websocket
    (the requests pages, the offenders page), and the request chart's time axis had no title:
    plotly.js 3 drops a title given as a bare string (issue 41)."""
    url, trace, _ = joined_trace
    sign_in(browser, url, viewer.username)
    wait = WebDriverWait(browser, 60, poll_frequency=0.2)
    pill = "const p = document.getElementById('live-indicator'); return [p.hidden, p.dataset.state, p.textContent];"
    browser.get(f"{url}/traces/{trace.pk}/requests/")
    wait.until(lambda b: b.find_elements(By.CSS_SELECTOR, "#worst-table tbody tr"))
    assert browser.execute_script(pill) == [True, "off", ""]
    # The latencies as a histogram with their percentiles, not as text only.
    wait.until(lambda b: b.find_element(By.ID, "latency-chart").get_attribute("data-drawn") == "1")
    histogram = browser.find_element(By.ID, "latency-chart")
    assert histogram.get_attribute("data-requests") == browser.find_element(By.ID, "requests").get_attribute("data-requests")
    assert int(histogram.get_attribute("data-bins")) >= 3 and histogram.find_elements(By.CSS_SELECTOR, ".main-svg")
    marked = " ".join(t.text for t in histogram.find_elements(By.CSS_SELECTOR, ".annotation-text"))
    assert "p50" in marked and "p99" in marked, marked
    browser.find_element(By.CSS_SELECTOR, "#worst-table tbody tr a").click()
    wait.until(lambda b: b.find_element(By.ID, "request-chart").get_attribute("data-drawn") == "1")
    assert browser.execute_script(pill) == [True, "off", ""]
    title = " ".join(t.text for t in browser.find_elements(By.CSS_SELECTOR, "#request-chart .xtitle"))
    assert "ms from the request" in title, title
    browser.get(f"{url}/offenders/")
    wait.until(lambda b: b.find_elements(By.TAG_NAME, "h1"))
    assert browser.execute_script(pill) == [True, "off", ""]
    browser.get(f"{url}/")  # the fleet page has a live channel: its pill shows
    wait.until(lambda b: b.execute_script(pill)[1] == "live")
    assert browser.execute_script(pill) == [False, "live", "live"]
