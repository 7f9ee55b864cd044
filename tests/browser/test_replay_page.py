"""A person replays a fault history from the dashboard, in Chromium: the upload, the Celery
worker's run with its progress, then the figures and the three Plotly charts."""

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from tests.support.browser import sign_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

CSV = "node,start,end,class,description\nn1,0.1,0.5,GPU,GPU Lost\nn2,0.2,1,NIC,NIC Lost\n"


def test_a_replay_from_the_page_runs_on_the_worker_and_shows_figures_and_charts(browser, live_stack, viewer, tmp_path):
    history = tmp_path / "history.csv"
    history.write_text(CSV)
    sign_in(browser, live_stack.url, "vera")
    browser.get(f"{live_stack.url}/replay/")
    browser.find_element(By.NAME, "history").send_keys(str(history))
    browser.find_element(By.NAME, "nodes").clear()
    browser.find_element(By.NAME, "nodes").send_keys("4")
    browser.find_element(By.NAME, "jobs").clear()
    browser.find_element(By.NAME, "jobs").send_keys("1x2")
    browser.find_element(By.NAME, "settings").send_keys('{"max_attempts": 2}')
    browser.find_element(By.NAME, "tune").click()
    browser.find_element(By.CSS_SELECTOR, "#replay-form button").click()
    WebDriverWait(browser, 60).until(
        lambda b: b.find_elements(By.CSS_SELECTOR, "#replay-run[data-done='true']")
        or "failed" in b.find_element(By.ID, "replay-state").text)
    assert browser.find_element(By.ID, "replay-state").text == "done"
    assert browser.find_element(By.ID, "replay-progress").get_attribute("value") == "1"
    heads = [th.text for th in browser.find_elements(By.CSS_SELECTOR, "#replay-figures tr:first-child th")]
    assert heads == ["", "asicmon", "none", "reboot"]
    pulls = browser.find_elements(By.CSS_SELECTOR, "#replay-figures tr[data-field='false_pulls'] td")
    assert [td.text for td in pulls] == ["0", "0", "0"]
    for chart in ("service", "ettr", "losses"):
        assert browser.find_elements(By.CSS_SELECTOR, f"#{chart} .main-svg"), chart
    # the tuning grid: 27 rows of settings, the best by ETTR marked and named
    assert browser.find_element(By.ID, "replay-grid").is_displayed()
    assert len(browser.find_elements(By.CSS_SELECTOR, "#replay-grid-table tr")) == 1 + 27
    assert len(browser.find_elements(By.CSS_SELECTOR, "#replay-grid-table tr.best")) == 1
    assert browser.find_element(By.ID, "replay-best").text.startswith("Best by ETTR: max_attempts ")


def test_a_bad_history_is_refused_on_the_page_with_why(browser, live_stack, viewer, tmp_path):
    history = tmp_path / "history.csv"
    history.write_text("n1,soon,1,GPU\n")
    sign_in(browser, live_stack.url, "vera")
    browser.get(f"{live_stack.url}/replay/")
    browser.find_element(By.NAME, "history").send_keys(str(history))
    browser.find_element(By.CSS_SELECTOR, "#replay-form button").click()
    error = WebDriverWait(browser, 20).until(lambda b: b.find_elements(By.ID, "replay-error"))[0]
    assert "history.csv:1: start and end must be days or ISO dates" in error.text


def test_bad_settings_are_refused_and_what_was_typed_stays(browser, live_stack, viewer, tmp_path):
    history = tmp_path / "history.csv"
    history.write_text(CSV)
    sign_in(browser, live_stack.url, "vera")
    browser.get(f"{live_stack.url}/replay/")
    browser.find_element(By.NAME, "history").send_keys(str(history))
    browser.find_element(By.NAME, "settings").send_keys('{"max_attempts": -1}')
    browser.find_element(By.CSS_SELECTOR, "#replay-form button").click()
    error = WebDriverWait(browser, 20).until(lambda b: b.find_elements(By.ID, "replay-error"))[0]
    assert "settings: max_attempts: -1 is not a number >= 0" in error.text
    assert browser.find_element(By.NAME, "settings").get_attribute("value") == '{"max_attempts": -1}'
