"""A real headless Chromium (Debian's, with its chromedriver) and the live stack it is driven
against: the one browser fixture, the one way to sign in, the one stack of processes."""

import shutil
import tempfile
from pathlib import Path

import pytest

from tests.support.processes import Service, start_beat, start_web, start_worker
from tests.support.tiers import drives_browser, starts_processes

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"


@pytest.fixture
@drives_browser
def browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service as DriverService

    if not (shutil.which("chromium") and shutil.which("chromedriver")):
        pytest.fail("Chromium and chromedriver are needed: `make browser-deps` installs them from Debian.")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    profile = tempfile.mkdtemp(prefix="asicmon-chromium-")
    for flag in [
        "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
        "--disable-quic", "--no-first-run", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", f"--user-data-dir={profile}",
        "--window-size=1400,1000",
    ]:
        options.add_argument(flag)
    driver = webdriver.Chrome(service=DriverService(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(30)
    yield driver
    driver.quit()
    shutil.rmtree(profile, ignore_errors=True)


def sign_in(browser, url: str, username: str) -> None:
    """Open the site, be sent to the sign-in page, sign in as one of the suite's users
    (tests/conftest.py: password "<name>-password-123") and land on the page asked for."""
    # Imported here: every test process loads this module, few of them drive a browser.
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get(f"{url}/")
    assert "/accounts/login/" in browser.current_url
    browser.find_element(By.ID, "id_username").send_keys(username)
    browser.find_element(By.ID, "id_password").send_keys(f"{username}-password-123")
    browser.find_element(By.ID, "sign-in").click()
    WebDriverWait(browser, 20).until(lambda b: "/accounts/login/" not in b.current_url)


class Stack:
    """The processes a browser test drives: a Celery worker (on the suite's queue, or another
    such as the traces queue), beat when given a schedule file, and Daphne at `url`."""

    def __init__(self, env: dict, *, beat_schedule: Path | None = None, queue: str | None = None,
                 concurrency: int = 2):
        self.env = env
        self.services: list[Service] = []
        try:
            self.services.append(start_worker(env, concurrency=concurrency, queue=queue))
            if beat_schedule is not None:
                self.services.append(start_beat(env, beat_schedule))
            self.web, self.url = start_web(env)
        except BaseException:
            self.stop()
            raise

    def restart_web(self) -> None:
        """Stop Daphne and start it again on the same port."""
        self.web.stop()
        self.web, _ = start_web(self.env, port=int(self.url.rsplit(":", 1)[1]))

    def stop(self) -> None:
        web = getattr(self, "web", None)
        for service in [web, *reversed(self.services)]:
            if service is not None:
                service.stop()


# --- One stack per test module -----------------------------------------------------------
# Starting a worker, beat and Daphne takes seconds: a module's tests share them. Each test
# still gets an emptied database with the test fleet seeded afresh (`seeded_fleet`); the
# stack's emulator state and trace files live in the module's folder, and the test process
# is pointed at the same ones.


@pytest.fixture(scope="module")
def stack_settings() -> dict:
    """Settings of the module's stack beyond the test fleet's (a test module overrides this
    fixture); the tests on the stack run with them too."""
    return {}


def _stack_env(folder: Path, stack_settings: dict) -> dict:
    from django.test import override_settings

    from tests.support.fleet import TEST_FLEET
    from tests.support.processes import child_env
    from tests.support.tsdb import unique_labels

    shared = {"EMULATOR_STATE_DIR": folder / "emulator", "TRACE_STORAGE_DIR": folder / "traces",
              "TSDB_LABELS": unique_labels(), "TSDB_BUFFER_DIR": folder / "tsdb-buffer"}
    with override_settings(**{**TEST_FLEET, **shared, **stack_settings}):  # a module's settings win
        return child_env()


def _on_the_stack(stack: Stack, stack_settings: dict, settings) -> None:
    """Give the test process the stack's settings, emulator folder and trace storage."""
    from fleet.hosts import emulated_fleet

    for name, value in stack_settings.items():
        setattr(settings, name, value)
    settings.EMULATOR_STATE_DIR = Path(stack.env["EMULATOR_STATE_DIR"])
    settings.TRACE_STORAGE_DIR = Path(stack.env["TRACE_STORAGE_DIR"])
    settings.TSDB_LABELS = stack.env["TSDB_LABELS"]  # the stack's series are the test's
    settings.TSDB_BUFFER_DIR = Path(stack.env["TSDB_BUFFER_DIR"])
    settings.STORAGES = {
        **settings.STORAGES,
        "traces": {**settings.STORAGES["traces"], "OPTIONS": {"location": stack.env["TRACE_STORAGE_DIR"]}},
    }
    emulated_fleet.host_monitor.cache_clear()


@pytest.fixture(scope="module")
@starts_processes
def module_stack(stack_settings, tmp_path_factory, django_db_setup):
    """A Celery worker and beat polling the test fleet, and Daphne, for the test module."""
    folder = tmp_path_factory.mktemp("stack")
    stack = Stack(_stack_env(folder, stack_settings), beat_schedule=folder / "beat-schedule")
    yield stack
    stack.stop()


@pytest.fixture
def live_stack(module_stack, seeded_fleet, stack_settings, settings) -> Stack:
    """The module's stack, polling this test's freshly seeded fleet."""
    _on_the_stack(module_stack, stack_settings, settings)
    return module_stack


@pytest.fixture(scope="module")
@starts_processes
def module_trace_stack(stack_settings, tmp_path_factory, django_db_setup):
    """A worker on the traces queue (captures and analyses) and Daphne, for the test module."""
    from traces.tasks import trace_queue

    folder = tmp_path_factory.mktemp("trace-stack")
    stack = Stack(_stack_env(folder, stack_settings), queue=trace_queue(), concurrency=2)
    yield stack
    stack.stop()


@pytest.fixture
def trace_stack(module_trace_stack, seeded_fleet, stack_settings, settings) -> str:
    """The module's trace stack, on this test's freshly seeded fleet: its URL."""
    _on_the_stack(module_trace_stack, stack_settings, settings)
    return module_trace_stack.url
