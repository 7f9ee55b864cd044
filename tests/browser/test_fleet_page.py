"""The fleet page in a real Chromium: the first page of devices, paging and filters done by
the server without a reload, and live updates for the visible rows only."""

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select, WebDriverWait

from fleet.models import Device
from tests.support.browser import Stack, sign_in
from tests.support.processes import child_env
from tests.support.tiers import starts_processes

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# Before the page's scripts run: keep every message the page's websockets receive.
RECORD_SOCKET = """
window.__received = [];
const Native = window.WebSocket;
window.WebSocket = function (...args) {
  const socket = new Native(...args);
  socket.addEventListener("message", (event) => window.__received.push(JSON.parse(event.data)));
  return socket;
};
window.WebSocket.prototype = Native.prototype;
window.WebSocket.OPEN = Native.OPEN;
"""


@pytest.fixture
def larger_fleet(fleet_settings, clean_redis):
    """4 hosts x 8 devices: two pages of 25 rows."""
    from fleet.hosts.emulated_fleet import seed_fleet

    fleet_settings.FLEET_HOSTS = 4
    fleet_settings.FLEET_DEVICES_PER_HOST = 8
    seed_fleet()
    return list(Device.objects.for_dashboard())


@pytest.fixture
@starts_processes
def stack(larger_fleet, tmp_path):
    running = Stack(child_env(POLL_INTERVAL="1"), beat_schedule=tmp_path / "beat-schedule")
    yield running.url
    running.stop()


def shown(browser) -> list[int]:
    """The rows of the table, read in one go (the page may swap the table in meanwhile)."""
    return browser.execute_script(
        "return [...document.querySelectorAll('#fleet-table tr[data-device-id]')].map((tr) => Number(tr.dataset.deviceId));"
    )


def socket_rows_since_last_subscribe(browser) -> tuple[int, set[int], int]:
    """(messages received after the page's last subscribe, the device ids they carried, how
    many carried a summary)."""
    received = browser.execute_script("return window.__received;")
    last = max((i for i, m in enumerate(received) if m["type"] == "subscribed"), default=None)
    if last is None:
        return 0, set(), 0
    polls = [m for m in received[last + 1 :] if m["type"] == "fleet.polled"]
    return len(polls), {line["id"] for m in polls for line in m["devices"]}, sum("summary" in m for m in polls)


def test_the_fleet_page_pages_and_filters_on_the_server_and_updates_only_its_rows(browser, stack, viewer, larger_fleet):
    browser.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": RECORD_SOCKET})
    sign_in(browser, stack, "vera")
    wait = WebDriverWait(browser, 40, poll_frequency=0.2)
    wait.until(lambda b: b.find_elements(By.ID, "fleet-table"))
    everything = [d.id for d in larger_fleet]
    assert shown(browser) == everything  # 32 devices: one page of 50
    wait.until(lambda b: b.find_element(By.ID, "live-indicator").get_attribute("data-state") == "live")
    browser.execute_script("window.__notReloaded = true;")

    # 25 rows a page: the server sends the first 25, without a reload.
    Select(browser.find_element(By.NAME, "per_page")).select_by_visible_text("25")
    browser.find_element(By.CSS_SELECTOR, "#fleet-filters button[type=submit]").click()
    wait.until(lambda b: shown(b) == everything[:25])
    assert "1–25 of 32 devices" in browser.find_element(By.ID, "fleet-range").text

    # The next page: the last 7 devices, and the socket now follows those rows only.
    browser.find_element(By.CSS_SELECTOR, "#fleet-pager a[rel=next]").click()
    wait.until(lambda b: shown(b) == everything[25:])
    assert "page=2" in browser.current_url and "per_page=25" in browser.current_url
    row = browser.find_element(By.CSS_SELECTOR, "#fleet-table tr[data-device-id]")
    cycle = wait.until(lambda b: row.get_attribute("data-cycle"))
    wait.until(lambda b: row.get_attribute("data-cycle") != cycle)  # updated live
    wait.until(lambda b: socket_rows_since_last_subscribe(b)[0] >= 8)  # two polls of every shard
    _, ids, _ = socket_rows_since_last_subscribe(browser)
    assert ids == set(everything[25:]), "the socket sent rows the page does not show"
    counts = browser.find_elements(By.CSS_SELECTOR, "[data-health-count] b")
    assert sum(int(b.text) for b in counts) == 32  # the summary stays fleet-wide

    # Filter by type: the server's rows of that type, from the first page.
    Select(browser.find_element(By.NAME, "type")).select_by_visible_text("gpu")
    browser.find_element(By.CSS_SELECTOR, "#fleet-filters button[type=submit]").click()
    gpus = [d.id for d in larger_fleet if d.device_type == "gpu"]
    wait.until(lambda b: shown(b) == gpus[:25])
    assert all(td.text == "gpu" for td in browser.find_elements(By.CSS_SELECTOR, "#fleet-table tbody td:nth-child(3)"))
    assert browser.execute_script("return window.__notReloaded === true;")

    # Back: the previous table again, still without a reload.
    browser.back()
    wait.until(lambda b: shown(b) == everything[25:])
    assert browser.execute_script("return window.__notReloaded === true;")
