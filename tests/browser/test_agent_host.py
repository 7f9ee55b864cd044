"""A real machine in the fleet: an agent process (a real Celery worker on its own queue),
real beat, Redis, PostgreSQL and Daphne, and a real Chromium on the fleet page."""

import os
import signal
import sys
import time
from collections import Counter
from datetime import UTC, datetime

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from fleet.models import Device, Host
from tests.support.browser import sign_in
from tests.support.hwmon import write_hwmon_tree
from tests.support.processes import Service, child_env, start_beat, start_web, start_worker
from tests.support.sysfs import BROKEN_SPEC, materialise, user_spec
from tests.support.tsdb import flush, raw_samples

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.django_db(transaction=True)]

INTERVAL = 1.0


def wait_until(condition, timeout=60.0, interval=0.2, what="condition"):
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(interval)
    raise TimeoutError(f"{what} never became true")


def start_agent(env) -> Service:
    agent = Service("agent", [sys.executable, "-m", "fleet.agent"], env)
    agent.wait_for_line("ready.", timeout=90)
    return agent


def kill(service: Service) -> None:
    os.killpg(service.proc.pid, signal.SIGKILL)
    service.proc.wait()


def stored_series(device_ids) -> list:
    """The devices' series in the store over the last hour, with their raw samples."""
    now = time.time()
    flush()
    wanted = {str(i) for i in device_ids}
    return [s for s in raw_samples(now - 3600, now, "asicmon_.+") if s.labels.get("device") in wanted]


def cycles_of(device_ids) -> list[float]:
    return sorted({t for series in stored_series(device_ids) for t, _ in series.points})


def duplicated_samples(device_ids) -> list:
    """(series, timestamp) stored more than once."""
    return [(s.labels["__name__"], s.labels["device"], t) for s in stored_series(device_ids)
            for t, n in Counter(t for t, _ in s.points).items() if n > 1]


@pytest.fixture
def agent_env(seeded_fleet, tmp_path):
    """The machine of "node-a": a generated hwmon tree, and a sysfs tree written by the
    emulator's materialise with a user spec that discovers it, beside a broken spec."""
    specs = tmp_path / "specs"
    user_spec(specs, materialise(tmp_path / "sysfs"))
    (specs / "broken.asimov").write_text(BROKEN_SPEC)
    return child_env(
        POLL_INTERVAL=str(INTERVAL),
        AGENT_HOST="node-a",
        AGENT_REDISCOVER_S="2",
        HWMON_ROOT=str(write_hwmon_tree(tmp_path / "sys")),
        ASIMOV_SPEC_DIRS=str(specs),
    )


def node_a_devices(api) -> list[dict]:
    return api.get("/api/devices/?host=node-a").json()["results"]


class Machine:
    """The scenario's parts (agent, central stack, browser), one method per step."""

    def __init__(self, env, tmp_path, browser, api):
        self.env, self.tmp_path, self.browser, self.api = env, tmp_path, browser, api
        self.services: list[Service] = []
        self.ids: list[int] = []

    def start_agent(self) -> Service:
        agent = start_agent(self.env)
        self.services.append(agent)
        return agent

    def registered(self, agent: Service, emulated_host: str) -> None:
        """Host and devices in the API, beside the emulated ones; the broken spec logged."""
        assert "agent of node-a on queue" in agent.output()
        assert "broken.asimov:4:7: error: unknown counter 'stats.temprature_c'" in agent.output()
        hosts = {h["name"]: h for h in self.api.get("/api/hosts/").json()["results"]}
        assert hosts["node-a"]["polled_by"] == "agent" and hosts["node-a"]["device_count"] == 6
        assert hosts[emulated_host]["polled_by"] == "emulator"
        listed = node_a_devices(self.api)
        assert sorted(d["type"] for d in listed) == ["hwmon"] * 3 + ["vt100"] * 3
        self.ids = [d["id"] for d in listed]

    def polled_each_interval(self) -> None:
        """The central stack's beat and worker route the host's polls to the agent's queue."""
        self.services.append(start_worker(self.env, concurrency=1))
        self.services.append(start_beat(self.env, self.tmp_path / "beat-schedule"))
        cycles = wait_until(lambda: (c := cycles_of(self.ids)) and len(c) >= 4 and c, what="four poll cycles")
        steps = {round(b - a, 3) for a, b in zip(cycles, cycles[1:])}
        assert INTERVAL in steps, f"no two consecutive cycles {INTERVAL} s apart: {cycles}"

    def on_the_fleet_page(self) -> None:
        """Shown, healthy, updated live; a counter a sensor cannot give is "not reported"."""
        web, url = start_web(self.env)
        self.services.append(web)
        sign_in(self.browser, url, "vera")
        wait = WebDriverWait(self.browser, 40, poll_frequency=0.2)
        row = wait.until(lambda b: b.find_element(By.CSS_SELECTOR, f'tr[data-device-id="{self.ids[0]}"]'))
        assert "hwmon:node-a:" in row.text or "EVT-" in row.text
        assert self.agent_status() == "polled by its agent"
        cycle = wait.until(lambda b: row.get_attribute("data-cycle"))
        wait.until(lambda b: row.get_attribute("data-cycle") != cycle)
        assert row.find_element(By.CSS_SELECTOR, '[data-field="health"]').text == "healthy"
        sensor = self.browser.find_element(By.XPATH, '//tr[td/a[contains(., ":coretemp")]]')
        assert sensor.find_element(By.CSS_SELECTOR, '[data-field="power_w"]').text == "not reported"

    def agent_status(self) -> str:
        return self.browser.find_element(By.CSS_SELECTOR, '[data-agent-status="node-a"]').text

    def unknown_once_killed(self, agent: Service) -> float:
        """Its devices turn unknown after the stale window, and the page says why."""
        kill(agent)
        killed_at = time.time()
        wait_until(lambda: all(d["health"] == "unknown" for d in node_a_devices(self.api)), what="devices unknown")
        reasons = self.api.get(f"/api/devices/{self.ids[0]}/").json()["health_reasons"]
        assert reasons and reasons[0].startswith("no data for")
        WebDriverWait(self.browser, 60, poll_frequency=1).until(
            lambda b: b.refresh() or "agent stopped" in self.agent_status()
        )
        badge = self.browser.find_element(By.CSS_SELECTOR, f'tr[data-device-id="{self.ids[0]}"] [data-field="health"]')
        assert badge.text == "unknown"
        return killed_at

    def resumed_without_duplicates(self, killed_at: float) -> None:
        before_restart = len(cycles_of(self.ids))
        self.start_agent()
        wait_until(lambda: any(c > killed_at for c in cycles_of(self.ids)[before_restart - 1:]), what="polls resumed")
        wait_until(lambda: all(d["health"] == "healthy" for d in node_a_devices(self.api)), what="healthy again")
        assert sorted(Device.objects.filter(host__name="node-a").values_list("id", flat=True)) == sorted(self.ids)
        assert Host.objects.get(name="node-a").agent_seen_at > datetime.fromtimestamp(killed_at, tz=UTC)
        assert duplicated_samples(self.ids) == []

    def absent_when_gone(self) -> None:
        """A sensor that goes away while the agent runs is marked absent, its history kept."""
        gone = Device.objects.get(serial="hwmon:node-a:acpitz")
        (self.tmp_path / "sys" / "class" / "hwmon" / "hwmon0").unlink()
        wait_until(lambda: self.api.get(f"/api/devices/{gone.id}/").json()["absent_since"], what="absent")
        assert stored_series([gone.id])
        self.browser.refresh()
        assert "Absent since" in self.browser.find_element(By.CSS_SELECTOR, f'tr[data-device-id="{gone.id}"]').text

    def stop(self) -> None:
        for service in reversed(self.services):
            service.stop()
            print(f"--- {service.name}\n{service.output()}")  # shown when the test fails


def test_agent_host_appears_is_polled_goes_unknown_when_killed_and_resumes(
    agent_env, tmp_path, browser, viewer, api_client, seeded_fleet
):
    api_client.force_authenticate(viewer)
    machine = Machine(agent_env, tmp_path, browser, api_client)
    try:
        agent = machine.start_agent()
        machine.registered(agent, seeded_fleet[0].host.name)
        machine.polled_each_interval()
        machine.on_the_fleet_page()
        killed_at = machine.unknown_once_killed(agent)
        machine.resumed_without_duplicates(killed_at)
        machine.absent_when_gone()
    finally:
        machine.stop()
