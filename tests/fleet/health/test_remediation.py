"""Remediation against the real Redis and database, polling the emulated fleet in-process:
reboots, the watch after them, repair, the brake and exactly-once claims."""

import time

import pytest
from django.utils import timezone

from fleet.choices import ActionKind, ActionStatus, DeviceState
from fleet.health import assessing
from fleet.hosts import emulated_fleet
from fleet.models import Action, Automation, Device, HealthEvent
from fleet.polling import poller

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def fleet(fleet_settings, clean_redis):
    fleet_settings.EMULATOR_REBOOT_S = 1.0
    fleet_settings.REMEDIATION_REBOOT_TIMEOUT_S = 4.0
    fleet_settings.REMEDIATION_MAX_ACTIVE = 3
    fleet_settings.REMEDIATION_MAX_PER_HOST = 2
    fleet_settings.REMEDIATION_PAUSE_CRITICAL = 5
    fleet_settings.REMEDIATION_MAX_REBOOTS = 2
    fleet_settings.PROBE_TIMEOUT = 0.5  # the default: a loaded machine must not make a healthy probe late
    emulated_fleet.seed_fleet()
    return list(Device.objects.for_dashboard())


def poll_all():
    cycle = time.time()  # a new key each call: these tests poll faster than the interval
    for shard in poller.shards():
        poller.poll_shard(shard, cycle)


def poll_until(condition, timeout=20.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        poll_all()
        if condition():
            return
        time.sleep(0.3)
    raise TimeoutError("condition never became true")


def inject(device, fault, persistent=False):
    emulated_fleet.host_monitor(device.host.name).inject_fault(device.serial, fault, persistent)


def state_of(device):
    return Device.objects.get(id=device.id).state


@pytest.mark.slow  # polls the fleet until hangs, reboots and repairs play out: seconds of CPU (make test runs it, make test-fast does not)
def test_a_hung_device_is_rebooted_once_and_back_in_service_when_healthy(fleet):
    poll_all()
    hung = fleet[1]
    inject(hung, "hang")
    poll_all()
    assert state_of(hung) == DeviceState.REBOOTING
    reboot = Action.objects.get(device=hung, kind=ActionKind.REBOOT)
    assert reboot.status == ActionStatus.ISSUED and reboot.rule == "driver" and reboot.user is None
    assert "driver hung" in reboot.reason
    event = HealthEvent.objects.get(device=hung, rule="driver", level="critical")
    assert event.values["driver_status"] == "hung"

    poll_until(lambda: state_of(hung) == DeviceState.IN_SERVICE)
    reboot.refresh_from_db()
    assert reboot.status == ActionStatus.SUCCEEDED and "healthy again" in reboot.outcome
    assert Action.objects.filter(device=hung, kind=ActionKind.REBOOT).count() == 1
    assert HealthEvent.objects.get(id=event.id).ended_at is not None
    # Nobody else was touched.
    others = Device.objects.exclude(id=hung.id)
    touched = list(Action.objects.exclude(device=hung).values_list("device__serial", "kind", "reason"))
    assert set(others.values_list("state", flat=True)) == {DeviceState.IN_SERVICE}, touched


@pytest.mark.slow  # polls the fleet until hangs, reboots and repairs play out: seconds of CPU (make test runs it, make test-fast does not)
def test_a_device_still_failing_after_its_reboot_goes_to_repair(fleet):
    poll_all()
    broken = fleet[2]
    inject(broken, "hang", persistent=True)  # survives reboots
    poll_until(lambda: state_of(broken) == DeviceState.REPAIR)
    kinds = list(Action.objects.filter(device=broken).order_by("id").values_list("kind", "status"))
    assert kinds == [(ActionKind.REBOOT, ActionStatus.FAILED), (ActionKind.REPAIR, ActionStatus.SUCCEEDED)]
    # In repair, it is left alone however critical it stays.
    for _ in range(3):
        poll_all()
    assert Action.objects.filter(device=broken).count() == 2


@pytest.mark.slow  # polls the fleet until hangs, reboots and repairs play out: seconds of CPU (make test runs it, make test-fast does not)
def test_more_reboots_than_allowed_in_the_window_send_a_device_to_repair(fleet):
    poll_all()
    flaky = fleet[0]
    for _ in range(2):
        inject(flaky, "hang")
        poll_until(lambda: state_of(flaky) == DeviceState.REBOOTING)
        poll_until(lambda: state_of(flaky) == DeviceState.IN_SERVICE)
    inject(flaky, "hang")
    poll_all()
    assert state_of(flaky) == DeviceState.REPAIR
    repair = Action.objects.get(device=flaky, kind=ActionKind.REPAIR)
    assert "2 reboots within 1 h" in repair.reason
    assert Action.objects.filter(device=flaky, kind=ActionKind.REBOOT).count() == 2


def test_the_brake_holds_automation_to_its_limits(fleet, fleet_settings):
    fleet_settings.REMEDIATION_MAX_ACTIVE = 1
    poll_all()
    for device in fleet[:3]:
        inject(device, "hang")
    poll_all()
    assert Device.objects.filter(state=DeviceState.REBOOTING).count() == 1
    assert Action.objects.filter(kind=ActionKind.REBOOT).count() == 1


@pytest.mark.slow  # polls the fleet until hangs, reboots and repairs play out: seconds of CPU (make test runs it, make test-fast does not)
def test_too_many_critical_at_once_pauses_automation_until_resumed(fleet, fleet_settings):
    from fleet.health.remediation import set_paused

    fleet_settings.REMEDIATION_PAUSE_CRITICAL = 3
    poll_all()
    for device in fleet[:3]:  # three of eight devices hang at once
        inject(device, "hang")
    poll_all()
    assert assessing.critical_count() == 3
    automation = Automation.current()
    assert automation.paused and "3 devices critical at once" in automation.reason
    assert Action.objects.filter(kind=ActionKind.REBOOT).count() == 0
    assert Action.objects.filter(kind=ActionKind.PAUSE).count() == 1
    poll_all()  # stays paused: nothing rebooted, the pause recorded once
    assert Action.objects.filter(kind=ActionKind.REBOOT).count() == 0
    assert Action.objects.filter(kind=ActionKind.PAUSE).count() == 1

    for device in fleet[1:3]:
        emulated_fleet.host_monitor(device.host.name).clear_fault(device.serial, "hang")
    poll_until(lambda: assessing.critical_count() == 1)  # still paused meanwhile
    assert Action.objects.filter(kind=ActionKind.REBOOT).count() == 0
    assert set_paused(False, reason="checked the rack")
    poll_until(lambda: state_of(fleet[0]) == DeviceState.REBOOTING)
    assert Action.objects.filter(kind=ActionKind.REBOOT).count() == 1


def test_dry_run_records_what_it_would_do_and_does_nothing(fleet, fleet_settings):
    fleet_settings.REMEDIATION_DRY_RUN = True
    poll_all()
    inject(fleet[0], "hang")
    poll_all()
    poll_all()
    assert state_of(fleet[0]) == DeviceState.IN_SERVICE
    action = Action.objects.get(device=fleet[0])
    assert action.status == ActionStatus.DRY_RUN and action.outcome == "dry run: would reboot"
    assert emulated_fleet.host_monitor(fleet[0].host.name).faults(fleet[0].serial)  # the fault is still there


def test_the_same_cycle_polled_twice_reboots_once(fleet):
    poll_all()
    hung = fleet[0]
    inject(hung, "hang")
    cycle = time.time()
    for _ in range(2):  # a retried or duplicated shard task
        for shard in poller.shards():
            poller.poll_shard(shard, cycle)
    assert Action.objects.filter(device=hung, kind=ActionKind.REBOOT).count() == 1
    assert HealthEvent.objects.filter(device=hung, rule="driver", ended_at__isnull=True).count() <= 1


def test_a_reboot_left_pending_by_a_dead_worker_is_completed_by_the_next_poll(fleet, fleet_settings):
    from datetime import timedelta

    from django.utils import timezone

    poll_all()
    device = fleet[3]
    # What a worker killed between its claim and the call to the device leaves behind.
    Device.objects.filter(id=device.id).update(state=DeviceState.REBOOTING)
    action = Action.objects.create(device=device, kind=ActionKind.REBOOT, rule="driver", reason="driver hung")
    Action.objects.filter(id=action.id).update(created_at=timezone.now() - timedelta(minutes=1))
    poll_all()
    action.refresh_from_db()
    assert action.status == ActionStatus.ISSUED
    poll_until(lambda: state_of(device) == DeviceState.IN_SERVICE)
    action.refresh_from_db()
    assert action.status == ActionStatus.SUCCEEDED


@pytest.mark.slow  # polls the fleet until hangs, reboots and repairs play out: seconds of CPU (make test runs it, make test-fast does not)
def test_a_device_in_maintenance_is_not_remediated_and_returns_when_it_ends(fleet):
    from datetime import timedelta

    from django.utils import timezone

    poll_all()
    device = fleet[0]
    Device.objects.filter(id=device.id).update(state=DeviceState.MAINTENANCE, maintenance_until=timezone.now() + timedelta(seconds=2))
    inject(device, "hang")
    poll_all()
    assert state_of(device) == DeviceState.MAINTENANCE
    assert not Action.objects.filter(device=device, kind=ActionKind.REBOOT).exists()
    emulated_fleet.host_monitor(device.host.name).clear_fault(device.serial, "hang")
    poll_until(lambda: state_of(device) == DeviceState.IN_SERVICE)
    assert Action.objects.get(device=device, kind=ActionKind.RETURN_TO_SERVICE).reason == "maintenance ended"


def test_a_snapshot_older_than_the_devices_return_to_service_does_not_reboot_it_again(fleet):
    """A slow poll read the device hung before another worker saw it back from its reboot."""
    from django.utils import timezone

    from fleet.health import remediation

    poll_all()
    device = fleet[0]
    read_before = time.time()
    time.sleep(0.05)
    Device.objects.filter(id=device.id).update(state_changed_at=timezone.now())  # back in service since
    stale = [{"rule": "driver", "level": "critical", "reason": "driver hung", "values": {"driver_status": "hung"}}]
    assert remediation.remediate(device.id, stale, sampled_at=read_before) is None
    assert not Action.objects.filter(device=device).exists()
    assert remediation.remediate(device.id, stale, sampled_at=time.time()) is not None  # a fresh reading does


def test_an_event_open_when_the_device_is_rebooted_is_closed_by_the_next_polls(fleet):
    """QA, issue 11: a leak's critical event stayed open after its reboot although the device
    was healthy again, because the reboot forgot which rules the device had open."""
    poll_all()
    device = fleet[2]
    window = assessing.read_windows([device.id])[device.id]
    window["open"] = {**window.get("open", {}), "memory_leak": "critical"}
    assessing._write({device.id: window}, [], [])
    event = HealthEvent.objects.create(
        device=device, rule="memory_leak", level="critical", reason="memory leak (QA)", started_at=timezone.now()
    )

    assessing.forget_windows([device.id])  # what a reboot does
    poll_all()

    event.refresh_from_db()
    assert event.ended_at is not None, "the leak's event is still open after the reboot"
    window = assessing.read_windows([device.id])[device.id]
    assert "memory_leak" not in window["open"]
