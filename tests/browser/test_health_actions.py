"""What operators and viewers do about health in the browser: reboot a device from its page
and watch it come back, no buttons for viewers, the paused-automation banner."""

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from fleet.choices import ActionKind, ActionStatus, DeviceState
from fleet.models import Action, Automation, Device
from tests.support.browser import sign_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture(scope="module")
def stack_settings():
    return {"POLL_INTERVAL": 1.0, "EMULATOR_REBOOT_S": 2.0, "REMEDIATION_REBOOT_TIMEOUT_S": 60.0}


@pytest.fixture
def stack(live_stack):
    return live_stack.url


def state_text(browser):
    return browser.find_element(By.CSS_SELECTOR, '#device-health [data-field="state"]').text


def test_an_operator_reboots_a_device_from_its_page_and_sees_it_come_back(browser, stack, operator, seeded_fleet):
    device = seeded_fleet[1]
    sign_in(browser, stack, "otto")
    wait = WebDriverWait(browser, 60, poll_frequency=0.2)
    wait.until(lambda b: b.find_elements(By.ID, "fleet-table"))
    browser.get(f"{stack}/devices/{device.id}/")
    wait.until(lambda b: b.find_element(By.CSS_SELECTOR, '#device [data-field="health"]').text == "healthy")
    assert state_text(browser) == "In service"
    browser.find_element(By.ID, "action-reason").send_keys("firmware update")
    browser.find_element(By.CSS_SELECTOR, 'button[data-action="reboot"]').click()
    wait.until(lambda b: state_text(b) == "Rebooting")
    wait.until(lambda b: state_text(b) == "In service")
    wait.until(lambda b: b.find_element(By.CSS_SELECTOR, '#device [data-field="health"]').text == "healthy")
    action = Action.objects.get(device=device, kind=ActionKind.REBOOT)
    assert action.status == ActionStatus.SUCCEEDED and action.user == operator
    assert action.reason == "firmware update"
    browser.refresh()
    log = wait.until(lambda b: b.find_element(By.CSS_SELECTOR, f'#device-actions-log tr[data-action-id="{action.id}"]'))
    assert "otto" in log.text and "Succeeded" in log.text and "healthy again" in log.text


def test_a_viewer_sees_the_page_but_no_buttons(browser, stack, viewer, seeded_fleet):
    sign_in(browser, stack, "vera")
    wait = WebDriverWait(browser, 30, poll_frequency=0.2)
    wait.until(lambda b: b.find_elements(By.ID, "fleet-table"))
    browser.get(f"{stack}/devices/{seeded_fleet[0].id}/")
    wait.until(lambda b: b.find_elements(By.ID, "health-events"))
    assert state_text(browser) == "In service"
    assert browser.find_elements(By.CSS_SELECTOR, "button[data-action]") == []
    assert browser.find_elements(By.ID, "device-actions") == []


def test_the_fleet_page_shows_paused_automation_until_an_operator_resumes_it(browser, stack, viewer, operator):
    Automation.objects.update_or_create(id=1, defaults={"paused": True, "reason": "9 devices critical at once (limit 8)"})
    sign_in(browser, stack, "vera")
    wait = WebDriverWait(browser, 30, poll_frequency=0.2)
    banner = wait.until(lambda b: b.find_element(By.ID, "automation-paused"))
    assert "Automated remediation is paused" in banner.text and "9 devices critical at once" in banner.text
    assert browser.find_elements(By.ID, "resume-automation") == []  # viewers cannot resume
    browser.delete_all_cookies()

    sign_in(browser, stack, "otto")
    wait.until(lambda b: b.find_element(By.ID, "automation-paused"))
    browser.find_element(By.ID, "resume-automation").click()
    wait.until(lambda b: b.find_elements(By.ID, "automation-paused") == [])
    assert Automation.current().paused is False
    assert Action.objects.get(kind=ActionKind.RESUME).user == operator
    browser.refresh()
    wait.until(lambda b: b.find_elements(By.ID, "fleet-table"))
    assert browser.find_elements(By.ID, "automation-paused") == []
    assert set(Device.objects.values_list("state", flat=True)) == {DeviceState.IN_SERVICE}
