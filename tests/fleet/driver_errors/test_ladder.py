"""The repair ladder, polled in this process: each fault's first rung, the validation gate,
the climb when a cause comes back, the attempt budget, the blast radius and the breaker.
(With real Celery workers: test_ladder_worker.py.)"""

import pytest

from fleet.choices import ActionStatus, DeviceState
from fleet.models import Action, Automation, Device, DriverError, Host
from tests.fleet.agent.conftest import agent_settings  # noqa: F401 - the fixture, here too
from tests.fleet.driver_errors.conftest import inject, poll_until

pytestmark = [pytest.mark.django_db(transaction=True)]


def _state(device):
    return Device.objects.get(id=device.id).state


def _actions(device):
    return list(Action.objects.filter(serial=device.serial, rule="driver_error").order_by("created_at", "id"))


def _back(device):
    return _state(device) == DeviceState.IN_SERVICE and _actions(device) and _actions(device)[-1].status == ActionStatus.SUCCEEDED


@pytest.mark.parametrize(("fault", "rung", "cause"), [
    ("xid_94", "restart_application", "memory"),
    ("xid_13", "restart_application", "application"),
    ("xid_95", "reset_device", "memory"),
    ("xid_119", "reset_device", "gsp"),
    ("xid_74", "reset_device", "nvlink"),
    ("xid_79", "reboot_host", "bus"),
])
@pytest.mark.slow  # over 1.5 s on 2 cores: in make test, out of make test-fast
def test_each_fault_gets_its_first_rung_and_returns_only_after_its_check_passes(gpu_ladder_fleet, fault, rung, cause):
    gpu = gpu_ladder_fleet[0]
    poll_until(lambda: True, polls=1)
    inject(gpu, fault)
    assert poll_until(lambda: _back(gpu)), [(a.rung, a.status, a.outcome) for a in _actions(gpu)]
    (action,) = _actions(gpu)
    assert (action.rung, action.cause, action.check_passed) == (rung, cause, True)
    assert action.check_detail == "diagnostic passed" and action.issued_at <= action.finished_at
    assert DriverError.objects.filter(serial=gpu.serial, handled_by=action).exists()


def test_ignore_class_events_are_recorded_and_never_acted_on(gpu_ladder_fleet):
    gpu = gpu_ladder_fleet[0]
    inject(gpu, "xid_43")
    poll_until(lambda: DriverError.objects.filter(serial=gpu.serial).exists())
    row = DriverError.objects.get(serial=gpu.serial)
    assert row.action == "ignore" and row.outcome.startswith("ignored")
    poll_until(lambda: False, polls=2)
    assert _actions(gpu) == [] and _state(gpu) == DeviceState.IN_SERVICE


def test_a_cause_that_comes_back_climbs_and_the_budget_ends_in_inspection(gpu_ladder_fleet, settings):
    settings.LADDER_MAX_ATTEMPTS = 2
    gpu = gpu_ladder_fleet[0]
    inject(gpu, "xid_94")  # memory, contained: restart the application
    assert poll_until(lambda: _back(gpu))
    inject(gpu, "xid_94")  # the same cause again: next rung
    assert poll_until(lambda: _back(gpu) and len(_actions(gpu)) == 2)
    inject(gpu, "xid_94")  # budget (2) spent: out of service
    assert poll_until(lambda: _state(gpu) == DeviceState.REPAIR)
    assert [a.rung for a in _actions(gpu)] == ["restart_application", "reset_device", "inspect_hardware"]
    assert "attempt budget spent: 2 repairs of memory" in _actions(gpu)[-1].reason


def test_a_failed_check_climbs_until_the_fault_is_gone(gpu_ladder_fleet):
    gpu = gpu_ladder_fleet[0]
    inject(gpu, "xid_95")  # needs a reset: a restart is not enough
    inject(gpu, "xid_13")  # ... and an application fault that starts the ladder lower
    assert poll_until(lambda: _back(gpu))
    actions = _actions(gpu)
    assert actions[0].rung == "reset_device"  # the worst of the poll's errors decides
    assert all(a.check_passed is not None for a in actions if a.status != ActionStatus.PENDING)


@pytest.mark.slow  # climbs the whole ladder poll by poll: seconds of CPU (make test runs it, make test-fast does not)
def test_remap_past_the_spare_rows_goes_to_inspection(gpu_ladder_fleet):
    gpu = gpu_ladder_fleet[0]
    for _ in range(3):  # two spare rows: the third remap fails (48 then 64)
        inject(gpu, "xid_48")
        poll_until(lambda: _state(gpu) != DeviceState.UNDER_REPAIR and _actions(gpu)
                   and _actions(gpu)[-1].status != ActionStatus.ISSUED, polls=25)
    assert poll_until(lambda: DriverError.objects.filter(serial=gpu.serial, code="64").exists(), polls=5)
    assert _state(gpu) == DeviceState.REPAIR
    assert [a.rung for a in _actions(gpu)] == ["reset_device", "reboot_host", "inspect_hardware"]
    assert not any(a.check_passed for a in _actions(gpu)[2:])  # never back without a passing check


def test_the_blast_radius_holds_a_second_device_of_the_same_workload(gpu_ladder_fleet, settings):
    settings.LADDER_MAX_PER_WORKLOAD = 1
    a, b = (d for d in gpu_ladder_fleet if d.host.name == "host-00")
    other = next(d for d in gpu_ladder_fleet if d.host.name == "host-02")
    assert a.workload == b.workload != other.workload
    for device in (a, b, other):
        inject(device, "xid_119")
    poll_until(lambda: Device.objects.filter(state=DeviceState.UNDER_REPAIR).count() >= 2, polls=3)
    busy = Device.objects.filter(state=DeviceState.UNDER_REPAIR)
    assert busy.filter(workload=a.workload).count() == 1 and busy.filter(id=other.id).exists()
    assert poll_until(lambda: _back(a) and _back(b), polls=40)  # the held one's turn came
    held = max((a, b), key=lambda d: _actions(d)[0].created_at)
    first = min((a, b), key=lambda d: _actions(d)[0].created_at)
    assert _actions(held)[0].created_at >= _actions(first)[-1].finished_at


def test_the_breaker_pauses_automation_when_too_much_of_the_fleet_is_under_repair(gpu_ladder_fleet, settings):
    settings.LADDER_BREAKER_SHARE = 0.25  # two of eight devices; the third trips it
    targets = [d for d in gpu_ladder_fleet if d.index == 0]
    for device in targets[:3]:
        inject(device, "xid_119")
    poll_until(lambda: Automation.read().paused, polls=4)
    assert Automation.read().paused and "breaker" in Automation.read().reason
    assert Action.objects.filter(rule="driver_error").values("device").distinct().count() == 2


def test_the_breaker_names_the_devices_that_tripped_it(gpu_ladder_fleet, settings):
    settings.LADDER_BREAKER_SHARE = 0.25
    targets = [d for d in gpu_ladder_fleet if d.index == 0][:3]
    for device in targets:
        inject(device, "xid_119")
    poll_until(lambda: Automation.read().paused, polls=4)
    taken = Action.objects.filter(rule="driver_error").values_list("serial", flat=True)
    reason = Automation.read().reason
    assert "3 of 8 devices" in reason and all(serial in reason for serial in taken)
    assert next(d.serial for d in targets if d.serial not in taken) in reason  # the one it held back too


@pytest.fixture
def sixteen_gpus(gpu_ladder_fleet, settings):
    """Two hosts of eight GPUs, the default breaker (at least 3 devices and more than 10 %)."""
    from fleet.hosts import emulated_fleet

    settings.FLEET_HOSTS, settings.FLEET_DEVICES_PER_HOST = 2, 8
    settings.LADDER_BREAKER_SHARE, settings.LADDER_BREAKER_MIN_DEVICES = 0.1, 3
    Host.objects.all().delete()
    emulated_fleet.host_monitor.cache_clear()
    emulated_fleet.seed_fleet()
    return list(Device.objects.for_dashboard())


def test_two_xids_on_one_host_of_sixteen_gpus_do_not_pause_automation(sixteen_gpus):
    assert len(sixteen_gpus) == 16
    a, b = [d for d in sixteen_gpus if d.host.name == "host-00"][:2]
    for device in (a, b):
        inject(device, "xid_119")
    assert poll_until(lambda: _back(a) and _back(b), polls=30)
    assert not Automation.read().paused
    assert [x.rung for x in _actions(a)] == [x.rung for x in _actions(b)] == ["reset_device"]


@pytest.mark.slow  # reboots a whole emulated host poll by poll: seconds of CPU (make test runs it, make test-fast does not)
def test_a_host_reboot_counts_every_device_of_its_host_against_the_blast_radius(gpu_ladder_fleet, settings):
    settings.LADDER_MAX_PER_WORKLOAD = 2
    settings.REMEDIATION_MAX_ACTIVE = 0  # the health rules reboot nothing: they leave the held device alone
    by_host = {}
    for d in gpu_ladder_fleet:
        by_host.setdefault(d.host.name, []).append(d)
    rebooting, neighbour = by_host["host-00"]
    elsewhere = by_host["host-01"][0]
    assert rebooting.workload == neighbour.workload == elsewhere.workload
    # A repair of the same workload already under way on another host.
    Device.objects.filter(id=elsewhere.id).update(state=DeviceState.UNDER_REPAIR)
    inject(rebooting, "xid_79")  # bus: reboot the host, both its devices
    poll_until(lambda: DriverError.objects.filter(serial=rebooting.serial).exists(), polls=3)
    poll_until(lambda: False, polls=2)
    assert _actions(rebooting) == [] and _state(rebooting) == DeviceState.IN_SERVICE  # 1 + 2 > 2: held
    Device.objects.filter(id=elsewhere.id).update(state=DeviceState.IN_SERVICE)
    assert poll_until(lambda: _back(rebooting))
    assert [x.rung for x in _actions(rebooting)] == ["reboot_host"]


@pytest.mark.parametrize(("restart", "reset", "reboot", "rung", "skipped"), [
    # (restart command, spec declares a reset, reboot command) -> the rung chosen, the rungs skipped
    ("requeue", True, "systemctl reboot", "restart_application", []),
    ("", True, "systemctl reboot", "reset_device", ["restart_application"]),
    ("", False, "systemctl reboot", "reboot_host", ["restart_application", "reset_device"]),
    ("requeue", False, "", "restart_application", []),
    ("", False, "", "needs_person", ["restart_application", "reset_device", "reboot_host"]),
])
def test_each_rung_is_tried_where_it_can_run_and_skipped_where_it_cannot(
        agent_settings, seeded_fleet, restart, reset, reboot, rung, skipped):  # noqa: F811
    from fleet.agent import queues
    from fleet.agent.discovery import agent_host
    from fleet.agent.registration import register_host
    from fleet.driver_errors.ladder import decide

    register_host("node-a", queues.agent_queue_name("node-a"), agent_host().devices)
    agent_settings.AGENT_RESTART_APP_COMMAND, agent_settings.AGENT_REBOOT_COMMAND = restart, reboot
    device = Device.objects.select_related("host").filter(host__name="node-a").first()
    device.control_actions = ["reboot"] if reset else []
    step = decide(device, "memory", "restart_application")
    assert (step.rung, [r for r, _ in step.skipped]) == (rung, skipped)
    if rung == "needs_person":
        assert step.reason == "needs a person: no reboot command configured on node-a (AGENT_REBOOT_COMMAND is empty)"


def test_a_climb_to_a_host_reboot_waits_while_the_blast_radius_holds_it(gpu_ladder_fleet, settings):
    from django.utils import timezone

    from fleet.driver_errors import gate, ladder

    settings.LADDER_MAX_PER_WORKLOAD = 2
    by_host = {}
    for d in gpu_ladder_fleet:
        by_host.setdefault(d.host.name, []).append(d)
    device, elsewhere = by_host["host-00"][0], by_host["host-01"][0]
    Device.objects.filter(id__in=[device.id, elsewhere.id]).update(state=DeviceState.UNDER_REPAIR)
    reset = Action.objects.create(device=device, kind="reboot", rung="reset_device", cause="bus", serial=device.serial,
                                  rule="driver_error", status=ActionStatus.ISSUED, issued_at=timezone.now())
    reboot = ladder.climb(reset, "check failed")
    assert (reboot.rung, reboot.status) == ("reboot_host", ActionStatus.PENDING)
    assert Action.objects.get(id=reboot.id).outcome.startswith("waiting: 1 devices of workload")
    gate.follow_up({device.id: {}})
    assert Action.objects.get(id=reboot.id).status == ActionStatus.PENDING  # still held
    Device.objects.filter(id=elsewhere.id).update(state=DeviceState.IN_SERVICE)
    gate.follow_up({device.id: {}})
    assert Action.objects.get(id=reboot.id).status == ActionStatus.ISSUED  # its turn came


def test_a_climb_while_automation_is_paused_waits_for_the_resume(gpu_ladder_fleet):
    """Found here: a failed check climbed to the next rung and ran it (a reboot command)
    while automation was paused. Now the rung is recorded, waiting, and runs once resumed."""
    from fleet.driver_errors import ladder
    from fleet.health import remediation

    gpu = gpu_ladder_fleet[0]
    inject(gpu, "xid_94")  # restart the application first
    assert poll_until(lambda: _state(gpu) == DeviceState.UNDER_REPAIR)
    first = _actions(gpu)[0]
    remediation.set_paused(True, reason="an operator, during a rollout")
    nxt = ladder.climb(first, "its check failed")
    nxt.refresh_from_db()
    assert (nxt.rung, nxt.status, nxt.outcome, nxt.issued_at) == ("reset_device", ActionStatus.PENDING,
                                                                  "waiting: automation is paused", None)
    poll_until(lambda: False, polls=2)
    nxt.refresh_from_db()
    assert nxt.status == ActionStatus.PENDING and nxt.issued_at is None  # still not run
    remediation.set_paused(False, reason="rollout done")
    assert poll_until(lambda: Action.objects.get(id=nxt.id).status != ActionStatus.PENDING)


def test_a_dry_run_records_the_rung_and_leaves_the_device_alone(gpu_ladder_fleet, settings):
    """Found here: REMEDIATION_DRY_RUN was not read by the repair ladder, which acted."""
    settings.REMEDIATION_DRY_RUN = True
    gpu = gpu_ladder_fleet[0]
    inject(gpu, "xid_79")
    assert poll_until(lambda: _actions(gpu))
    poll_until(lambda: False, polls=2)
    (action,) = _actions(gpu)
    assert (action.rung, action.status, action.outcome) == ("reboot_host", ActionStatus.DRY_RUN, "dry run: would reboot host")
    assert _state(gpu) == DeviceState.IN_SERVICE
