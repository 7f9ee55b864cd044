"""Faults injected into a fleet polled by a real Celery worker through the real broker:
how many polls until each is found, and how long until automation has rebooted the ones it
reboots and they are healthy again. Two workers polling the same cycle reboot a device once.

The timings are printed (pytest -s) for the figures in the README; the assertions hold the
polls each fault may take.
"""

import time

import pytest

from fleet.choices import ActionKind, ActionStatus, DeviceState
from fleet.hosts import emulated_fleet
from fleet.models import Action, Device
from fleet.polling import poller, snapshots
from fleet.tasks import poll_fleet
from tests.fleet.health.test_detection import FOUND_BY
from tests.support.processes import child_env, start_worker

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

POLL = 2.0
# A fault is found within this many seconds, polled every 2 s. The window rules count points
# about 5 s apart whatever the interval (docs/health.md), so these are test_health.py's bounds
# at 5 s polls plus a poll: a failed cooler needs the die to heat up, about 30 s of thermal
# lag (at a busy hour the temperature rule finds it first: FOUND_BY). The leak needs points for a trend, and this window is only seconds old when it begins:
# test_detection.py's bound for such a window (FRESH_LEAK_WITHIN_S).
WITHIN_S = {"hang": 4, "ecc_storm": 12, "pcie_degraded": 4, "overheat": 34, "core_stuck": 30, "memory_leak": 90}
WITHIN_POLLS = {fault: round(seconds / POLL) for fault, seconds in WITHIN_S.items()}


@pytest.fixture
def fast_fleet(fleet_settings, clean_redis):
    fleet_settings.FLEET_HOSTS = 3
    fleet_settings.FLEET_DEVICES_PER_HOST = 3
    fleet_settings.POLL_INTERVAL = POLL
    fleet_settings.POLL_SHARDS = 3
    fleet_settings.EMULATOR_REBOOT_S = 3.0
    fleet_settings.REMEDIATION_REBOOT_TIMEOUT_S = 30.0
    fleet_settings.REMEDIATION_MAX_ACTIVE = 9
    fleet_settings.REMEDIATION_MAX_PER_HOST = 3
    fleet_settings.REMEDIATION_PAUSE_CRITICAL = 9
    # A leak is critical as soon as it is found, so that the test sees it rebooted.
    fleet_settings.HEALTH_LIMITS = {"leak_critical_s": 36000}
    emulated_fleet.seed_fleet()
    return list(Device.objects.for_dashboard())


class Driver:
    """Queues one fleet poll per interval through the broker, as beat does."""

    def __init__(self, devices: int):
        self.devices = devices
        self.polls = 0

    def poll(self) -> dict[int, dict]:
        """One beat tick: queue the cycle, wait (a little) for the worker to store it. A cycle
        the busy machine did not finish in time is skipped, as beat's expiring tasks are."""
        cycle = poller.current_cycle()
        poll_fleet.delay(cycle)
        self.polls += 1
        deadline = cycle + 3 * POLL
        while time.time() < deadline:
            latest = snapshots.read_snapshots()
            if len(latest) == self.devices and all(s["cycle"] >= cycle for s in latest.values()):
                break
            time.sleep(0.05)
        wait = cycle + POLL - time.time()
        if wait > 0:
            time.sleep(wait)
        return snapshots.read_snapshots()


def rules(snapshot: dict) -> set[str]:
    return {f["rule"] for f in snapshot.get("health_findings") or []}


def test_every_fault_is_found_and_hung_ecc_and_leaking_devices_come_back_healthy(fast_fleet):
    worker = start_worker(child_env(), concurrency=2)
    try:
        driver = Driver(len(fast_fleet))
        for _ in range(4):
            driver.poll()
        # One device per fault, each type of device getting some. A stuck core goes to a
        # device that reports per-core activity: on a GPU it shows only while the GPU is not
        # busy anyway (docs/health.md), which depends on the hour.
        others = [d for d in fast_fleet if d.device_type != "gpu"]
        gpus = [d for d in fast_fleet if d.device_type == "gpu"]
        targets = dict(zip(FOUND_BY, others[:5] + gpus[:1], strict=True))
        injected_at = time.time()
        for fault, device in targets.items():
            emulated_fleet.host_monitor(device.host.name).inject_fault(device.serial, fault)
        found: dict[str, tuple[int, float]] = {}
        first = driver.polls
        while len(found) < len(targets) and driver.polls - first < max(WITHIN_POLLS.values()) + 2:
            latest = driver.poll()
            for fault, device in targets.items():
                by = FOUND_BY[fault] & rules(latest[device.id])
                if fault not in found and by:
                    found[fault] = (driver.polls - first, time.time() - injected_at, ", ".join(sorted(by)))
        for fault, (polls, seconds, by) in sorted(found.items(), key=lambda kv: kv[1]):
            print(f"{fault:14s} found by rule {by:12s} after {polls} polls, {seconds:.1f} s")
        assert set(found) == set(targets), f"not found: {set(targets) - set(found)}"
        for fault, (polls, _, _) in found.items():
            assert polls <= WITHIN_POLLS[fault], (fault, polls)

        rebooted = {"hang", "ecc_storm", "memory_leak"}
        deadline = time.time() + 120
        back: dict[str, float] = {}
        while len(back) < len(rebooted) and time.time() < deadline:
            driver.poll()
            for fault in rebooted - set(back):
                action = Action.objects.filter(device=targets[fault], kind=ActionKind.REBOOT).first()
                if action and action.status == ActionStatus.SUCCEEDED:
                    back[fault] = action.finished_at.timestamp() - injected_at
        for fault, seconds in back.items():
            print(f"{fault:14s} rebooted by automation and healthy again {seconds:.1f} s after injection")
        assert set(back) == rebooted, f"not back: {rebooted - set(back)}"
        for fault in rebooted:
            assert Device.objects.get(id=targets[fault].id).state == DeviceState.IN_SERVICE
            assert Action.objects.filter(device=targets[fault], kind=ActionKind.REBOOT).count() == 1
        # Warnings are watched, not rebooted; an overheating device left alone long enough
        # reaches the critical temperature, and that is rebooted.
        for fault in set(targets) - rebooted:
            actions = list(Action.objects.filter(device=targets[fault]).values_list("kind", "rule"))
            allowed = [(ActionKind.REBOOT, "temperature")] if fault == "overheat" else []
            assert all(action in allowed for action in actions), (fault, actions)
    finally:
        worker.stop()


def test_two_workers_polling_the_same_cycle_reboot_a_device_once(fast_fleet):
    workers = [start_worker(child_env(), concurrency=1) for _ in range(2)]
    workers[1].name = "worker-2"
    try:
        driver = Driver(len(fast_fleet))
        driver.poll()
        hung = fast_fleet[4]
        emulated_fleet.host_monitor(hung.host.name).inject_fault(hung.serial, "hang")
        cycle = poller.current_cycle() + POLL
        time.sleep(max(0.0, cycle - time.time()))
        for _ in range(3):  # the same cycle, three times: both workers take some
            poll_fleet.delay(cycle)
        deadline = time.time() + 30
        while time.time() < deadline and not Action.objects.filter(device=hung).exists():
            time.sleep(0.2)
        time.sleep(3.0)  # let the duplicates finish
        assert Action.objects.filter(device=hung, kind=ActionKind.REBOOT).count() == 1
        outputs = [w.output() for w in workers]
        assert all("cycle" in out for out in outputs), "both workers polled"
    finally:
        for w in workers:
            w.stop()
