"""A person looks at a device after a driver error, in Chromium: the error marked on its
graphs' time axis and listed with its meaning, the rung taken and the check's result; the
fleet page counts it; the repeat offenders page ranks the device."""

import time

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from fleet.hosts import emulated_fleet
from fleet.models import Action
from fleet.polling import poller
from tests.support.browser import sign_in
from tests.support.processes import child_env, start_web
from tests.support.tiers import starts_processes
from tests.support.tsdb import flush

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
@starts_processes
def web(seeded_fleet):
    service, url = start_web(child_env())
    yield url
    service.stop()


def _poll_until(predicate, polls=1000, within_s=90.0):
    """Polls both shards until ``predicate()``, at most ``polls`` times within ``within_s``
    (a busy machine polls slowly)."""
    deadline = time.monotonic() + within_s
    for _ in range(polls):
        poller.poll_shard(0, poller.current_cycle())
        poller.poll_shard(1, poller.current_cycle())
        if predicate():
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.4)
    return False


def test_a_device_page_shows_its_driver_errors_on_the_graphs_and_in_a_table(browser, web, viewer, seeded_fleet, settings):
    settings.EMULATOR_REBOOT_S = 0.5
    gpu = next(d for d in seeded_fleet if d.device_type == "gpu")
    _poll_until(lambda: True, polls=2)
    emulated_fleet.host_monitor(gpu.host.name).inject_fault(gpu.serial, "xid_95")
    emulated_fleet.host_monitor(gpu.host.name).inject_fault(gpu.serial, "xid_43")
    assert _poll_until(lambda: Action.objects.filter(serial=gpu.serial, check_passed=True).exists())
    # The graphs draw what the store holds: without this the page could come before the
    # polls' samples were readable, draw no graph, and (no poll coming) never mark one.
    flush()

    sign_in(browser, web, "vera")
    wait = WebDriverWait(browser, 30, poll_frequency=0.2)
    browser.get(f"{web}/devices/{gpu.id}/?range=1h")
    wait.until(lambda b: b.find_elements(By.CSS_SELECTOR, "#charts .chart[data-error-marks='2']"))
    notes = browser.execute_script(
        "return document.querySelector('#charts .chart[data-error-marks]').layout.annotations.map((a) => a.text);")
    assert {"Xid 95", "Xid 43"} <= set(notes)
    row = browser.find_element(By.CSS_SELECTOR, "#driver-errors tr[data-code='95']")
    assert "Uncontained ECC error" in row.text and "200" in row.text
    assert row.find_element(By.CSS_SELECTOR, "[data-field='rung']").text == "reset_device"
    assert row.find_element(By.CSS_SELECTOR, "[data-field='check']").text.startswith("passed")
    ignored = browser.find_element(By.CSS_SELECTOR, "#driver-errors tr[data-code='43']")
    assert "ignored" in ignored.find_element(By.CSS_SELECTOR, "[data-field='taken']").text

    browser.get(f"{web}/")
    counted = wait.until(lambda b: b.find_element(By.CSS_SELECTOR, "[data-summary='driver-errors']"))
    assert int(counted.text) == 2
    browser.find_element(By.LINK_TEXT, "repeat offenders").click()
    wait.until(lambda b: b.find_elements(By.CSS_SELECTOR, f"#offenders tr[data-serial='{gpu.serial}']"))
