"""What a person does: sign in, watch the fleet update live, open a device's graphs."""

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from tests.support.processes import child_env, start_beat, start_web, start_worker

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def stack(seeded_fleet, tmp_path):
    env = child_env(POLL_INTERVAL="1")
    worker = start_worker(env)
    beat = start_beat(env, tmp_path / "beat-schedule")
    web, url = start_web(env)
    yield url
    for service in (web, beat, worker):
        service.stop()


def sign_in(browser, url, username, password):
    browser.get(f"{url}/")
    assert "/accounts/login/" in browser.current_url
    browser.find_element(By.ID, "id_username").send_keys(username)
    browser.find_element(By.ID, "id_password").send_keys(password)
    browser.find_element(By.ID, "sign-in").click()


def test_fleet_updates_live_and_device_graph_grows(browser, stack, viewer, seeded_fleet):
    sign_in(browser, stack, "vera", "vera-password-123")
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

    # Drill into the device: its Plotly graph grows with each poll.
    first.find_element(By.TAG_NAME, "a").click()
    wait.until(lambda b: b.find_elements(By.CSS_SELECTOR, "#chart-temperature_c .main-svg"))
    wait.until(lambda b: int(b.find_element(By.ID, "chart-temperature_c").get_attribute("data-points") or 0) >= 1)
    points = int(browser.find_element(By.ID, "chart-temperature_c").get_attribute("data-points"))
    wait.until(lambda b: int(b.find_element(By.ID, "chart-temperature_c").get_attribute("data-points")) > points)
