"""What a person does with traces in a real Chromium: capture, watch, drill in; upload."""

from decimal import Decimal

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from tests.support.browser import sign_in
from tests.support.traces import exact_totals_by_name, real_trace

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_operator_captures_watches_progress_and_drills_into_an_operator(browser, trace_stack, operator, seeded_fleet):
    device = seeded_fleet[1]
    sign_in(browser, trace_stack, "otto")
    browser.get(f"{trace_stack}/devices/{device.id}/")
    wait = WebDriverWait(browser, 60, poll_frequency=0.1)
    duration = browser.find_element(By.ID, "capture-duration")
    assert duration.get_attribute("value") == "5"
    duration.clear()
    duration.send_keys("3")
    browser.find_element(By.ID, "capture-button").click()

    # The bar moves while the capture runs (several distinct values before it is full).
    seen = set()

    def progressed(b):
        value = b.find_element(By.ID, "capture-progress").get_attribute("data-progress")
        if value:
            seen.add(value)
        return len([v for v in seen if 0 < float(v) < 1]) >= 2

    wait.until(progressed)
    assert "events" in browser.find_element(By.ID, "capture-status").text

    # When ready, the trace's page opens and shows the breakdown chart and table.
    wait.until(lambda b: "/traces/" in b.current_url)
    wait.until(lambda b: b.find_elements(By.CSS_SELECTOR, "#breakdown-chart .main-svg"))
    wait.until(lambda b: int(b.find_element(By.ID, "breakdown-table").get_attribute("data-rows") or 0) > 0)
    assert browser.find_element(By.ID, "trace-status").text == "ready"
    assert browser.find_element(By.ID, "kind-select").get_attribute("value") == "host_op"

    # The accelerator side; click an operator type and see its instances.
    browser.find_element(By.CSS_SELECTOR, '#side-tabs button[data-side="device"]').click()
    wait.until(lambda b: b.find_elements(By.CSS_SELECTOR, '#breakdown-table tbody tr[data-kind="kernel"]'))
    row = browser.find_element(By.CSS_SELECTOR, '#breakdown-table tbody tr[data-kind="kernel"]')
    op = row.get_attribute("data-op")
    row.find_element(By.TAG_NAME, "a").click()
    wait.until(lambda b: b.find_element(By.ID, "drilldown").get_attribute("data-op") == op)
    wait.until(lambda b: int(b.find_element(By.ID, "instance-table").get_attribute("data-rows") or 0) > 0)
    assert browser.find_elements(By.CSS_SELECTOR, "#drill-histogram .main-svg")
    first = browser.find_elements(By.CSS_SELECTOR, "#instance-table tbody tr")[0].text
    assert op in first and "fw::" in first  # the host operator that launched it

    # Group the instances by an arg: one row per distinct value, counts adding up.
    from selenium.webdriver.support.ui import Select

    Select(browser.find_element(By.ID, "group-by")).select_by_value("shapes")
    wait.until(lambda b: b.find_elements(By.CSS_SELECTOR, "#group-table:not([hidden]) tbody tr"))
    counts = [int(r.find_elements(By.TAG_NAME, "td")[1].text.replace(",", ""))
              for r in browser.find_elements(By.CSS_SELECTOR, "#group-table tbody tr")]
    total = int(browser.find_element(By.ID, "drill-count").text.split()[0].replace(",", ""))
    assert sum(counts) == total


def test_viewer_sees_no_capture_button(browser, trace_stack, viewer, seeded_fleet):
    sign_in(browser, trace_stack, "vera")
    browser.get(f"{trace_stack}/devices/{seeded_fleet[0].id}/")
    WebDriverWait(browser, 20).until(lambda b: b.find_elements(By.ID, "device-traces"))
    assert not browser.find_elements(By.ID, "capture-button")


def test_upload_of_a_real_trace_reaches_a_breakdown_equal_to_the_raw_events(browser, trace_stack, operator):
    path = real_trace("mi300_qwen_infer.json.gz")
    sign_in(browser, trace_stack, "otto")
    browser.get(f"{trace_stack}/traces/upload/")
    browser.find_element(By.ID, "upload-file").send_keys(str(path))
    browser.find_element(By.ID, "upload-submit").click()
    wait = WebDriverWait(browser, 90, poll_frequency=0.2)
    wait.until(lambda b: "/traces/upload/" not in b.current_url and "/traces/" in b.current_url)
    wait.until(lambda b: int(b.find_element(By.ID, "breakdown-table").get_attribute("data-rows") or 0) > 0)
    rows = browser.find_elements(By.CSS_SELECTOR, "#breakdown-table tbody tr")
    shown = {r.get_attribute("data-op"): Decimal(r.get_attribute("data-total-us")) for r in rows}
    exact = exact_totals_by_name(path, {"cpu_op"})
    assert set(shown) == set(exact)
    for op, (_count, total) in exact.items():
        assert shown[op] == total.quantize(Decimal("0.001")), op

    # QA: a real kernel name is hundreds of characters without a space; drilling into it
    # must wrap it, not push the instance table's columns off the page.
    browser.find_element(By.CSS_SELECTOR, '#side-tabs button[data-side="device"]').click()
    wait.until(lambda b: b.find_elements(By.CSS_SELECTOR, '#breakdown-table tbody tr[data-kind="kernel"]'))
    longest = max(browser.find_elements(By.CSS_SELECTOR, '#breakdown-table tbody tr[data-kind="kernel"]'),
                  key=lambda r: len(r.get_attribute("data-op")))
    assert len(longest.get_attribute("data-op")) > 150
    longest.find_element(By.TAG_NAME, "a").click()
    wait.until(lambda b: int(b.find_element(By.ID, "instance-table").get_attribute("data-rows") or 0) > 0)
    overflow = browser.execute_script("return document.documentElement.scrollWidth - window.innerWidth")
    wide = browser.execute_script("return [...document.querySelectorAll('body *')].filter(e => e.getBoundingClientRect().right > window.innerWidth + 5).slice(0, 8).map(e => e.tagName + '#' + e.id + '.' + e.className + ' ' + Math.round(e.getBoundingClientRect().width))")
    assert overflow <= 0, f"the page scrolls {overflow} px sideways: {wide}"


def test_bad_upload_shows_the_engines_message(browser, trace_stack, operator, tmp_path):
    bad = tmp_path / "cut.json.gz"
    bad.write_bytes(real_trace("simple_add_kineto.json.gz").read_bytes()[:-300])
    sign_in(browser, trace_stack, "otto")
    browser.get(f"{trace_stack}/traces/upload/")
    browser.find_element(By.ID, "upload-file").send_keys(str(bad))
    browser.find_element(By.ID, "upload-submit").click()
    wait = WebDriverWait(browser, 30)
    wait.until(lambda b: b.find_element(By.ID, "upload-error").text)
    message = browser.find_element(By.ID, "upload-error").text
    assert "cut.json.gz" in message and "truncated" in message
    assert "/traces/upload/" in browser.current_url


def test_operator_captures_an_inference_device_playing_a_serving_problem(browser, trace_stack, operator, seeded_fleet):
    from traces.models import Trace

    gpu = next(d for d in seeded_fleet if d.device_type == "gpu")
    sign_in(browser, trace_stack, "otto")
    browser.get(f"{trace_stack}/devices/{gpu.id}/")
    WebDriverWait(browser, 20).until(lambda b: b.find_elements(By.ID, "capture-button"))
    assert not browser.find_elements(By.ID, "capture-problems")  # only a device that serves requests plays them

    inference = next(d for d in seeded_fleet if d.device_type == "inference")
    browser.get(f"{trace_stack}/devices/{inference.id}/")
    wait = WebDriverWait(browser, 60, poll_frequency=0.1)
    wait.until(lambda b: b.find_elements(By.ID, "capture-problems"))
    boxes = browser.find_elements(By.CSS_SELECTOR, '#capture-problems input[name="problems"]')
    assert [b.get_attribute("value") for b in boxes] == ["long_prefill", "throttled", "host_stall", "full_queue"]
    duration = browser.find_element(By.ID, "capture-duration")
    duration.clear()
    duration.send_keys("1")
    browser.find_element(By.CSS_SELECTOR, '#capture-problems input[value="full_queue"]').click()
    browser.find_element(By.ID, "capture-button").click()
    wait.until(lambda b: "/traces/" in b.current_url)  # captured, analysed, its page open
    trace = Trace.objects.get(device=inference)
    assert trace.params == {"duration_s": 1.0, "problems": ["full_queue"]}
