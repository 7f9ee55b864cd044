"""The trace views in a real Chromium: two real captures of one device type on different
software versions (through the real stack: traces worker, Daphne), their flame and timeline
with the critical path, the comparison listing the slowed operator first, the catalogue's
tick-two, and capture marks on the device page that open the trace."""

import time

import pytest
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from fleet.polling import poller
from fleet.polling.sharding import shard_of_host
from tests.support.browser import sign_in
from tests.support.tsdb import flush
from traces import writers
from traces.models import Trace

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _ready_capture(device, user, timeout=120) -> Trace:
    trace = writers.request_capture(device, user, 1)
    deadline = time.time() + timeout
    while time.time() < deadline:
        trace.refresh_from_db()
        if trace.status in ("ready", "failed"):
            break
        time.sleep(0.3)
    assert trace.status == "ready", (trace.status, trace.error)
    return trace


@pytest.fixture
def two_versions(trace_stack, seeded_fleet, operator):
    gpus = {writers._device_facts(d)["sw_version"]: d for d in seeded_fleet if d.device_type == "gpu"}
    assert {"2.0", "2.1"} <= set(gpus), "the test fleet has gpu devices on 2.0 and 2.1"
    old = _ready_capture(gpus["2.0"], operator)
    new = _ready_capture(gpus["2.1"], operator)
    return trace_stack, old, new


def _js(browser, script, *args):
    return browser.execute_script(script, *args)


def test_flame_timeline_and_comparison_of_two_versions(browser, two_versions):
    url, old, new = two_versions
    sign_in(browser, url, "otto")
    browser.get(f"{url}/traces/{new.id}/")
    wait = WebDriverWait(browser, 60, poll_frequency=0.2)
    wait.until(lambda b: b.find_element(By.ID, "trace-views").get_attribute("data-loaded") == "1")

    # The flame renders, and a click on a box zooms into it.
    flame = browser.find_element(By.ID, "flame-chart")
    assert flame.find_elements(By.CSS_SELECTOR, ".main-svg")
    assert int(flame.get_attribute("data-nodes")) > 3
    boxes = flame.find_elements(By.CSS_SELECTOR, "g.slice")
    assert len(boxes) > 3
    target = boxes[1]
    label = target.text.split("\n")[0]
    ActionChains(browser).move_to_element(target).click().perform()
    wait.until(lambda b: b.find_element(By.ID, "flame-chart").get_attribute("data-zoomed-to"))
    wait.until(lambda b: _js(b, "return document.getElementById('flame-chart')._fullData[0].level") not in (None, ""))
    assert label and flame.get_attribute("data-zoomed-to")
    # Search highlights the matching boxes.
    browser.find_element(By.ID, "flame-search").send_keys("fw::")
    wait.until(lambda b: "matching" in b.find_element(By.ID, "flame-matches").text)

    # The timeline shows critical-path bars in red, and a zoom asks the server for a narrower window.
    chart = browser.find_element(By.ID, "timeline-chart")
    assert int(chart.get_attribute("data-critical-bars")) > 0
    assert chart.find_elements(By.CSS_SELECTOR, "g.trace.bars path[style*='rgb(214, 39, 40)']")
    first = (float(chart.get_attribute("data-window-start-us")), float(chart.get_attribute("data-window-end-us")))
    requests = int(chart.get_attribute("data-requests"))
    drag = chart.find_element(By.CSS_SELECTOR, ".nsewdrag")
    box = drag.rect
    ActionChains(browser).move_to_element_with_offset(drag, -box["width"] // 2 + 40, 0).click_and_hold() \
        .move_by_offset(60, 0).release().perform()
    wait.until(lambda b: int(b.find_element(By.ID, "timeline-chart").get_attribute("data-requests")) > requests)
    second = (float(chart.get_attribute("data-window-start-us")), float(chart.get_attribute("data-window-end-us")))
    assert second[1] - second[0] < (first[1] - first[0]) / 5
    assert first[0] <= second[0] < second[1] <= first[1]

    # A step from the selector: the critical-path table follows it.
    steps = browser.find_elements(By.CSS_SELECTOR, "#step-select option")
    assert len(steps) > 2
    steps[2].click()
    wait.until(lambda b: steps[2].text in b.find_element(By.ID, "path-summary").text)
    assert browser.find_elements(By.CSS_SELECTOR, "#path-table tbody tr")

    # Metrics of the device around the capture, on the page.
    wait.until(lambda b: b.find_element(By.ID, "metrics-card").is_displayed())

    # A row of the least-slack table opens its event (the critical-path panel asks the
    # timeline's event detail); the host/accelerator states are drawn in the CSS's colours.
    browser.find_element(By.CSS_SELECTOR, "#slack-table tbody tr").click()
    wait.until(lambda b: b.find_element(By.ID, "event-detail").get_attribute("data-event"))
    assert browser.find_element(By.ID, "event-detail").is_displayed()
    states = _js(browser, "return document.getElementById('states-chart').data.map((t) => t.line.color)")
    css = _js(browser, "const s = getComputedStyle(document.documentElement);"
                       "return ['device-bound', 'device-busy', 'host-bound', 'idle'].map((n) => s.getPropertyValue(`--chart-${n}`).trim())")
    assert states == css and all(c.startswith("#") for c in css)

    # Compare with the previous capture of this workload: the slowed operator comes first.
    browser.find_element(By.ID, "compare-previous").click()
    wait.until(lambda b: b.find_elements(By.ID, "compare-table"))
    assert browser.find_element(By.ID, "version-a").text == "2.0"
    assert browser.find_element(By.ID, "version-b").text == "2.1"
    top = browser.find_element(By.CSS_SELECTOR, "#compare-table tbody tr").find_elements(By.TAG_NAME, "td")
    assert (top[0].text, top[1].text) == ("bmm", "device")
    wait.until(lambda b: b.find_elements(By.CSS_SELECTOR, "#delta-chart .main-svg"))


def test_catalogue_tick_two_and_a_device_capture_mark_opens_its_trace(browser, two_versions, seeded_fleet):
    url, old, new = two_versions
    sign_in(browser, url, "otto")
    wait = WebDriverWait(browser, 60, poll_frequency=0.2)
    browser.get(f"{url}/traces/")
    button = browser.find_element(By.ID, "compare-picked")
    assert not button.is_enabled()
    browser.find_element(By.CSS_SELECTOR, f"input.compare-pick[value='{old.id}']").click()
    browser.find_element(By.CSS_SELECTOR, f"input.compare-pick[value='{new.id}']").click()
    assert button.is_enabled()
    button.click()
    wait.until(lambda b: "/traces/compare/" in b.current_url)
    assert f"a={old.id}&b={new.id}" in browser.current_url
    top = browser.find_element(By.CSS_SELECTOR, "#compare-table tbody tr td").text
    assert top == "bmm"

    # On the device page the capture is a mark on the graphs (a device's graphs need samples:
    # without any they say so); clicking it opens the trace.
    cycle = poller.current_cycle()
    poller.poll_shard(shard_of_host(new.device.host_id), cycle)
    flush(newest=cycle)  # the samples, readable from the time-series store
    browser.get(f"{url}/devices/{new.device_id}/")
    wait.until(lambda b: b.find_elements(By.CSS_SELECTOR, "#charts .chart[data-capture-marks='1']"))
    mark = browser.find_element(By.CSS_SELECTOR, "#charts .chart g.annotation")
    assert f"trace #{new.id}" in mark.text
    ActionChains(browser).move_to_element(mark).click().perform()
    wait.until(lambda b: b.current_url.rstrip("/").endswith(f"/traces/{new.id}"))
