"""What a person does: sign in, watch the fleet update live, open a device's graphs."""

import re

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from fleet.reading.key_counters import KEY_COUNTERS
from tests.support.browser import sign_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture(scope="module")
def stack_settings():
    return {"POLL_INTERVAL": 1.0}


@pytest.fixture
def stack(live_stack):
    return live_stack


def test_fleet_updates_live_and_device_graph_grows(browser, stack, viewer, seeded_fleet):
    sign_in(browser, stack.url, "vera")
    wait = WebDriverWait(browser, 30, poll_frequency=0.2)
    wait.until(lambda b: b.find_elements(By.ID, "fleet-table"))
    rows = browser.find_elements(By.CSS_SELECTOR, "#fleet-table tr[data-device-id]")
    assert len(rows) == len(seeded_fleet)

    # Mark the page: a reload would lose the mark.
    browser.execute_script("window.__notReloaded = true;")
    wait.until(lambda b: b.find_element(By.ID, "live-indicator").get_attribute("data-state") == "live")
    first = rows[0]
    cycle_before = wait.until(lambda b: first.get_attribute("data-cycle"))
    temp_before = first.find_element(By.CSS_SELECTOR, '[data-field="temperature_c"]').text
    wait.until(lambda b: first.get_attribute("data-cycle") != cycle_before)
    assert browser.execute_script("return window.__notReloaded === true;")
    assert first.find_element(By.CSS_SELECTOR, '[data-field="temperature_c"]').text.endswith("°C")
    # Counters move between polls (utilization or temperature of some device changes).
    wait.until(
        lambda b: any(
            cell.text not in {"–", temp_before}
            for cell in b.find_elements(By.CSS_SELECTOR, '[data-field="temperature_c"]')
        )
    )

    # The page script formats every key counter as the table says (fleet/reading/key_counters.py).
    for counter in KEY_COUNTERS:
        decimals = rf"\.\d{{{counter.digits}}}" if counter.digits else ""
        shape = re.compile(rf"-?\d+{decimals}{re.escape(counter.suffix)}|–")
        text = first.find_element(By.CSS_SELECTOR, f'[data-field="{counter.name}"]').text
        assert shape.fullmatch(text), (counter.name, text)

    # Drill into the device: its Plotly graph grows with each poll.
    first.find_element(By.TAG_NAME, "a").click()
    wait.until(lambda b: b.find_elements(By.CSS_SELECTOR, "#chart-temperature_c .main-svg"))
    wait.until(lambda b: int(b.find_element(By.ID, "chart-temperature_c").get_attribute("data-points") or 0) >= 1)
    points = int(browser.find_element(By.ID, "chart-temperature_c").get_attribute("data-points"))
    wait.until(lambda b: int(b.find_element(By.ID, "chart-temperature_c").get_attribute("data-points")) > points)


def test_page_reconnects_by_itself_after_the_server_drops(browser, stack, viewer, seeded_fleet):
    sign_in(browser, stack.url, "vera")
    wait = WebDriverWait(browser, 40, poll_frequency=0.2)
    indicator = lambda b: b.find_element(By.ID, "live-indicator").get_attribute("data-state")  # noqa: E731
    wait.until(lambda b: indicator(b) == "live")
    browser.execute_script("window.__notReloaded = true;")

    stack.web.stop()
    wait.until(lambda b: indicator(b) == "reconnecting")
    stack.restart_web()
    wait.until(lambda b: indicator(b) == "live")

    row = browser.find_element(By.CSS_SELECTOR, "#fleet-table tr[data-device-id]")
    cycle = row.get_attribute("data-cycle")
    wait.until(lambda b: row.get_attribute("data-cycle") not in (None, cycle))
    assert browser.execute_script("return window.__notReloaded === true;")


def test_page_fetch_wrapper_sends_the_csrf_token(browser, stack, viewer, seeded_fleet):
    """lib/http.js: a POST through the wrapper passes Django's CSRF check; a bare one does not."""
    sign_in(browser, stack.url, "vera")
    WebDriverWait(browser, 30).until(lambda b: b.find_elements(By.ID, "fleet-table"))
    bare = browser.execute_async_script(
        "const done = arguments[0];"
        "fetch('/accounts/logout/', {method: 'POST', credentials: 'same-origin'})"
        ".then((r) => done(r.status), (e) => done(String(e)));"
    )
    assert bare == 403
    wrapped = browser.execute_async_script(
        "const done = arguments[0];"
        "import('/static/dashboard/js/lib/http.js')"
        ".then((http) => http.fetchJSON('/accounts/logout/', {method: 'POST'}))"
        ".then((r) => done(r.ok ? 'ok' : `${r.status}: ${r.data.detail}`), (e) => done(String(e)));"
    )
    assert wrapped == "ok"
    browser.get(f"{stack.url}/")
    assert "/accounts/login/" in browser.current_url  # the POST really signed us out
