"""A device page's range links: a long range draws 1-minute rollups (mean and min–max band)
and says so; the short default draws raw samples, which live polls extend."""

from datetime import UTC, datetime, timedelta

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from fleet import rollups, samples
from fleet.models import Sample
from tests.support.browser import sign_in
from tests.support.processes import child_env, start_web
from tests.support.tiers import starts_processes

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
@starts_processes
def web(seeded_fleet):
    service, url = start_web(child_env())
    yield url
    service.stop()


def traces(browser) -> int:
    return browser.execute_script("return document.getElementById('chart-temperature_c').data.length;")


def test_a_long_range_draws_rollups_and_a_short_one_raw_samples(browser, web, viewer, seeded_fleet):
    device = seeded_fleet[0]
    temperature = samples.counter_ids()["temperature_c"]
    now = rollups.floor(datetime.now(tz=UTC), rollups.MINUTE)
    Sample.objects.bulk_create([Sample(device=device, counter_id=temperature, ts=now - timedelta(seconds=30 * n),
                                       value=40.0 + n % 9) for n in range(240)])
    rollups.roll_up(now=now + timedelta(minutes=1))

    sign_in(browser, web, "vera")
    wait = WebDriverWait(browser, 30, poll_frequency=0.2)

    browser.get(f"{web}/devices/{device.id}/?range=24h")
    wait.until(lambda b: b.find_elements(By.CSS_SELECTOR, "#chart-temperature_c .main-svg"))
    assert browser.find_element(By.ID, "resolution").get_attribute("data-resolution") == "1m"
    assert "1-minute" in browser.find_element(By.ID, "resolution").text
    assert traces(browser) == 3  # mean, then the band's max and min
    assert browser.execute_script("return document.getElementById('chart-temperature_c').data[0].x.length;") == 120

    browser.find_element(By.LINK_TEXT, "15 min").click()
    wait.until(lambda b: b.find_element(By.ID, "resolution").get_attribute("data-resolution") == "raw")
    wait.until(lambda b: b.find_elements(By.CSS_SELECTOR, "#chart-temperature_c .main-svg"))
    assert traces(browser) == 1
    # Raw samples of the last 15 minutes (30 s apart, the line broken between them).
    assert browser.execute_script("return document.getElementById('chart-temperature_c').data[0].x.length;") >= 25
