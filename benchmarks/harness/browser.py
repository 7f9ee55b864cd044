"""A real Chromium for the benchmarks that time what a person sees (Debian's headless
`chromium` and `chromedriver`, `make browser-deps`): started with a throwaway profile,
signed in through the sign-in page, and the page's Performance API marks read back."""

from __future__ import annotations

import shutil
import tempfile


def chromium():
    """Headless Chromium with a throwaway profile (``driver.profile``: remove it after quit)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or "/usr/bin/chromium"
    profile = tempfile.mkdtemp(prefix="asicmon-bench-chromium-")
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--no-first-run", "--disable-background-networking", "--disable-sync",
                 f"--user-data-dir={profile}", "--window-size=1400,1000"):
        options.add_argument(flag)
    service = Service(shutil.which("chromedriver") or "/usr/bin/chromedriver")
    driver = webdriver.Chrome(service=service, options=options)
    driver.profile = profile
    return driver


def quit_chromium(driver) -> None:
    driver.quit()
    shutil.rmtree(driver.profile, ignore_errors=True)


def sign_in(driver, url: str, username: str, password: str) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get(f"{url}/accounts/login/")
    driver.find_element(By.ID, "id_username").send_keys(username)
    driver.find_element(By.ID, "id_password").send_keys(password)
    driver.find_element(By.ID, "sign-in").click()
    WebDriverWait(driver, 30).until(lambda d: "/accounts/login/" not in d.current_url)


def mark(driver, name: str) -> float | None:
    """The page's Performance mark ``name`` (ms since navigation start), None before it."""
    return driver.execute_script(
        "const m = performance.getEntriesByName(arguments[0]); return m.length ? m[0].startTime : null;", name
    )
