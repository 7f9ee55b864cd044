"""Rough edges a new user saw in Chromium (issue 20), each shown fixed in a real browser:
units in table headers read as written, a device without samples says so instead of charting
the year 2000, and the least-slack table is grouped by operator without zero-length events."""

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from fleet.polling import poller, snapshots
from fleet.polling.sharding import shard_of_host
from tests.support.browser import sign_in
from tests.support.processes import child_env, start_web
from tests.support.trace_views import emulated_trace
from tests.support.traces import real_trace
from traces import writers

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# Every table header whose text the browser renders differently from the page's text (CSS
# text-transform made "µs" read "ΜS", i.e. "MS").
TRANSFORMED_HEADERS = """
return [...document.querySelectorAll("th")]
  .filter((th) => th.offsetParent !== null)
  .map((th) => [th.textContent.replace(/\\s+/g, " ").trim(), th.innerText.replace(/\\s+/g, " ").trim()]);
"""


@pytest.fixture
def web(seeded_fleet, settings, tmp_path):
    """Daphne over this test's database and trace storage; no worker (traces are analysed here)."""
    location = tmp_path / "traces"
    settings.STORAGES = {
        **settings.STORAGES,
        "traces": {"BACKEND": "django.core.files.storage.FileSystemStorage", "OPTIONS": {"location": str(location)}},
    }
    service, url = start_web(child_env(TRACE_STORAGE_DIR=location))
    yield url
    service.stop()


def headers_shown(browser) -> list[tuple[str, str]]:
    return [tuple(pair) for pair in browser.execute_script(TRANSFORMED_HEADERS)]


def test_table_headers_show_their_units_as_written(browser, web, viewer, operator, seeded_fleet):
    poller.poll_shard(0, poller.current_cycle())
    old = emulated_trace(operator, version="2.0", seed=1)
    new = emulated_trace(operator, version="2.1", seed=2)
    sign_in(browser, web, "vera")
    wait = WebDriverWait(browser, 30, poll_frequency=0.2)
    pages = {
        "fleet": ("/", "#fleet-table th"),
        "device": (f"/devices/{seeded_fleet[0].id}/", "#counters th"),
        "catalogue": ("/traces/", "th"),
        "trace": (f"/traces/{new.pk}/", "#path-table tbody tr"),
        "comparison": (f"/traces/compare/?a={old.pk}&b={new.pk}", "th"),
        "versions": ("/traces/versions/?workload=transformer&type=gpu", "th"),
    }
    seen = []
    for name, (path, ready) in pages.items():
        browser.get(f"{web}{path}")
        wait.until(lambda b, ready=ready: b.find_elements(By.CSS_SELECTOR, ready))
        shown = headers_shown(browser)
        assert shown, name
        transformed = [(text, rendered) for text, rendered in shown if text != rendered]
        assert not transformed, f"{name}: headers shown otherwise than written: {transformed}"
        seen += [text for text, _ in shown]
    with_units = [text for text in seen if "µs" in text]
    assert len(with_units) >= 5, with_units  # the trace page's tables and the comparison's


def test_a_device_without_samples_says_so_instead_of_charting_the_year_2000(browser, web, viewer, seeded_fleet):
    device = seeded_fleet[0]  # seeded, never polled
    sign_in(browser, web, "vera")
    browser.get(f"{web}/devices/{device.id}/")
    wait = WebDriverWait(browser, 30, poll_frequency=0.2)
    wait.until(lambda b: b.find_element(By.ID, "live-indicator").get_attribute("data-state") == "live")
    charts = browser.find_elements(By.CSS_SELECTOR, "#charts .chart")
    assert charts
    for chart in charts:
        assert "no samples yet" in chart.text, chart.get_attribute("id")
    assert not browser.find_elements(By.CSS_SELECTOR, "#charts .js-plotly-plot")
    assert "2000" not in browser.find_element(By.ID, "charts").text

    # The first poll draws each graph whose counter the device reported from that sample.
    poller.poll_shard(shard_of_host(device.host_id), poller.current_cycle())
    reported = {name for name, value in snapshots.read_snapshot(device.id).items() if value is not None}
    expected = {c.get_attribute("data-counter") for c in charts} & reported
    assert expected
    wait.until(lambda b: {c.get_attribute("data-counter") for c in b.find_elements(By.CSS_SELECTOR, "#charts .js-plotly-plot")} == expected)
    for chart in browser.find_elements(By.CSS_SELECTOR, "#charts .chart"):
        if chart.get_attribute("data-counter") in expected:
            assert chart.get_attribute("data-points") == "1" and "2000" not in chart.text
        else:  # not reported by this device's driver: still says so
            assert "no samples yet" in chart.text


def test_the_least_slack_table_groups_operators_and_hides_zero_length_events(browser, web, viewer, operator):
    path = real_trace("a100_alexnet_train.json.gz")
    trace = writers.accept_upload(SimpleUploadedFile(path.name, path.read_bytes()), operator)
    writers.analyse(trace.pk)
    sign_in(browser, web, "vera")
    browser.get(f"{web}/traces/{trace.pk}/")
    wait = WebDriverWait(browser, 60, poll_frequency=0.2)
    rows = wait.until(lambda b: b.find_elements(By.CSS_SELECTOR, "#slack-table tbody tr"))
    cells = [[td.text for td in row.find_elements(By.TAG_NAME, "td")] for row in rows]
    names = [c[0] for c in cells]
    assert len(names) == len(set(names)), names
    assert "aten::_has_compatible_shallow_copy_type" not in names  # zero-length events only
    assert all(float(c[3].replace(",", "")) > 0 for c in cells), cells  # durations
    assert "zero-length events hidden" in browser.find_element(By.ID, "slack-summary").text
    rows[0].click()  # a row opens the details of its operator's event with the least slack
    detail = wait.until(lambda b: b.find_element(By.ID, "event-detail").is_displayed() and b.find_element(By.ID, "event-detail"))
    assert names[0] in detail.text


# Each toggle button's text colour and background, and each drawn chart's x-axis title (charts with an x axis).
TOGGLES = """
return [...document.querySelectorAll(".tabs button")].filter((b) => b.offsetParent !== null)
  .map((b) => [b.textContent.trim(), getComputedStyle(b).color, getComputedStyle(b).backgroundColor]);
"""
AXIS_TITLES = """
return [...document.querySelectorAll("#trace-views .js-plotly-plot")]
  .filter((c) => c.offsetParent !== null && c.querySelector(".xtick"))
  .map((c) => [c.id, [...c.querySelectorAll(".xtitle")].map((t) => t.textContent)]);
"""


def luminance(css_colour: str) -> float:
    """The relative luminance (WCAG) of an `rgb(…)`/`rgba(…)` colour."""
    channels = [float(v) / 255 for v in css_colour[css_colour.index("(") + 1:-1].split(",")[:3]]
    linear = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def contrast(a: str, b: str) -> float:
    high, low = sorted((luminance(a), luminance(b)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def test_toggles_are_readable_and_time_axes_say_their_unit(browser, web, viewer, operator):
    """The flame's "Accelerator" toggle was white on white until clicked (issue 26), and the
    timeline's axis titles were dropped: plotly.js 3 ignores a title given as a bare string."""
    trace = emulated_trace(operator, version="2.0", seed=1)
    sign_in(browser, web, "vera")
    browser.get(f"{web}/traces/{trace.pk}/")
    wait = WebDriverWait(browser, 60, poll_frequency=0.2)
    wait.until(lambda b: b.find_elements(By.CSS_SELECTOR, "#timeline-chart .js-plotly-plot, #timeline-chart.js-plotly-plot"))
    toggles = browser.execute_script(TOGGLES)
    assert {"Host", "Accelerator"} <= {label for label, _, _ in toggles}, toggles
    for label, colour, background in toggles:
        assert contrast(colour, background) >= 3, f"{label}: {colour} on {background}"
    titles = dict(browser.execute_script(AXIS_TITLES))
    assert "timeline-chart" in titles, titles
    assert any("ms" in t for t in titles["timeline-chart"]), titles
    untitled = [chart for chart, texts in titles.items() if not any(texts)]
    assert not untitled, f"charts with no x-axis title: {untitled}"


def test_pages_load_without_a_missing_resource(browser, web, viewer, seeded_fleet):
    """Every resource a page asks for is served (the browser asked for /favicon.ico, a 404 in
    every page's console, before the pages named their icon)."""
    sign_in(browser, web, "vera")
    wait = WebDriverWait(browser, 30, poll_frequency=0.2)
    browser.get_log("browser")  # what the sign-in left
    for path, ready in (("/", "#fleet-table th"), (f"/devices/{seeded_fleet[0].id}/", "#counters th")):
        browser.get(f"{web}{path}")
        wait.until(lambda b, ready=ready: b.find_elements(By.CSS_SELECTOR, ready))
        missing = [e["message"] for e in browser.get_log("browser") if "status of 404" in e["message"]]
        assert not missing, (path, missing)
    icon = browser.execute_script("return document.querySelector('link[rel=icon]').href")
    assert icon.endswith(".svg")
    browser.get(f"{web}/favicon.ico")  # what a browser or a tool asks for whatever the page links
    assert browser.current_url == icon and "<svg" in browser.page_source
