"""What a person does: sign in, watch the fleet update live, open a device's graphs."""

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from tests.support.processes import child_env, start_beat, start_web, start_worker

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


class Stack:
    """Worker, beat and web server, with the web server restartable on the same port."""

    def __init__(self, tmp_path):
        self.env = child_env(POLL_INTERVAL="1")
        self.worker = start_worker(self.env)
        self.beat = start_beat(self.env, tmp_path / "beat-schedule")
        self.web, self.url = start_web(self.env)

    def restart_web(self):
        self.web.stop()
        self.web, _ = start_web(self.env, port=int(self.url.rsplit(":", 1)[1]))

    def stop(self):
        for service in (self.web, self.beat, self.worker):
            service.stop()


@pytest.fixture
def stack(seeded_fleet, tmp_path):
    running = Stack(tmp_path)
    yield running
    running.stop()


def sign_in(browser, url, username, password):
    browser.get(f"{url}/")
    assert "/accounts/login/" in browser.current_url
    browser.find_element(By.ID, "id_username").send_keys(username)
    browser.find_element(By.ID, "id_password").send_keys(password)
    browser.find_element(By.ID, "sign-in").click()


def test_fleet_updates_live_and_device_graph_grows(browser, stack, viewer, seeded_fleet):
    sign_in(browser, stack.url, "vera", "vera-password-123")
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


def test_page_reconnects_by_itself_after_the_server_drops(browser, stack, viewer, seeded_fleet):
    sign_in(browser, stack.url, "vera", "vera-password-123")
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
