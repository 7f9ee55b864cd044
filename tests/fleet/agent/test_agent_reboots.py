"""Reboots a real device's spec declares: made through its monitor's control action, on its
own machine (in its agent). A user spec in a temporary ASIMOV_SPEC_DIRS reads a sysfs tree
written to disk by the emulator's materialise and declares `action reboot = write("reset", "1")`."""

import sys
import time

import pytest

from fleet.agent import queues
from fleet.agent.discovery import agent_host
from fleet.agent.registration import register_host
from fleet.choices import ActionKind, ActionStatus, DeviceState
from fleet.health import control
from fleet.models import Action, Device, Host
from fleet.polling import poller
from tests.support.sysfs import materialise, user_spec, without_reboot

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def vt_machine(agent_settings, fleet_settings, clean_redis, tmp_path):
    """node-a with three VT-100s read through a user spec (and hwmon sensors)."""
    fleet_settings.FLEET_HOSTS = 0
    sysfs = materialise(tmp_path / "sysfs")
    spec = user_spec(tmp_path / "specs", sysfs)
    agent_settings.ASIMOV_SPEC_DIRS = [tmp_path / "specs"]
    return sysfs, spec


def register() -> Host:
    register_host("node-a", queues.agent_queue_name("node-a"), agent_host().devices)
    return Host.objects.get(name="node-a")


def vt0(sysfs) -> Device:
    return Device.objects.get(serial=(sysfs / "vt0" / "serial").read_text().strip())


def poll_until(host: Host, condition, what: str, timeout: float = 30.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        poller.poll_agent_host(host.id, time.time())
        if value := condition():
            return value
        time.sleep(0.3)
    raise TimeoutError(f"{what} never happened")


def test_registration_records_what_each_spec_declares(vt_machine):
    sysfs, _ = vt_machine
    host = register()
    assert vt0(sysfs).control_actions == ["reboot"]
    sensors = Device.objects.filter(host=host, device_type="hwmon")
    assert sensors.count() == 3 and all(d.control_actions == [] for d in sensors)
    assert control.reboot_unavailable_reason(vt0(sysfs)) is None
    assert "hwmon spec declares no reboot" in control.reboot_unavailable_reason(sensors.first())


def test_an_overheating_device_is_rebooted_through_its_spec_and_comes_back(vt_machine):
    sysfs, _ = vt_machine
    host = register()
    device, temp = vt0(sysfs), sysfs / "vt0" / "hwmon" / "temp1_input"
    reset = sysfs / "vt0" / "reset"
    temp.write_text("99000\n")
    action = poll_until(host, lambda: Action.objects.filter(device=device, kind=ActionKind.REBOOT).first(), "a reboot")
    assert reset.read_text() == "1"  # the spec's write, made by the agent's monitor
    assert (sysfs / "vt1" / "reset").read_text() == "0\n"
    assert Action.objects.get(pk=action.pk).status == ActionStatus.ISSUED
    temp.write_text("52000\n")  # the reset cured it
    poll_until(host, lambda: Device.objects.get(pk=device.pk).state == DeviceState.IN_SERVICE, "back in service")
    done = Action.objects.get(pk=action.pk)
    assert done.status == ActionStatus.SUCCEEDED and "healthy again" in done.outcome
    assert not Action.objects.filter(kind=ActionKind.REPAIR).exists()


def test_a_reboot_of_another_hosts_device_is_refused_by_this_agent(vt_machine):
    sysfs, _ = vt_machine
    register()
    Host.objects.create(name="node-b", agent_queue=queues.agent_queue_name("node-b"))
    Device.objects.filter(pk=vt0(sysfs).pk).update(host=Host.objects.get(name="node-b"))
    with pytest.raises(control.MisroutedAction, match="agent of node-a was asked"):
        control.reboot_device(Device.objects.select_related("host").get(pk=vt0(sysfs).pk))
    assert (sysfs / "vt0" / "reset").read_text() == "0\n"


def test_a_spec_without_reboot_is_refused_and_automation_repairs(vt_machine, operator, api_client):
    sysfs, spec = vt_machine
    without_reboot(spec)
    host = register()
    device = vt0(sysfs)
    assert device.control_actions == []
    api_client.force_authenticate(operator)
    response = api_client.post(f"/api/devices/{device.id}/actions/", {"action": "reboot"}, format="json")
    assert response.status_code == 409
    assert "vt100 spec declares no reboot" in response.json()["detail"]
    assert not Action.objects.exists()

    (sysfs / "vt0" / "hwmon" / "temp1_input").write_text("99000\n")
    poll_until(host, lambda: Device.objects.get(pk=device.pk).state == DeviceState.REPAIR, "repair")
    assert Action.objects.get(device=device).kind == ActionKind.REPAIR
    assert (sysfs / "vt0" / "reset").read_text() == "0\n"


def test_an_edited_spec_is_picked_up_when_the_agent_registers_again(vt_machine):
    sysfs, spec = vt_machine
    register()
    assert vt0(sysfs).control_actions == ["reboot"]
    without_reboot(spec)
    from fleet.agent.discovery import rediscover

    register_host("node-a", queues.agent_queue_name("node-a"), rediscover().host.devices)
    assert vt0(sysfs).control_actions == []


def wait_until(condition, what: str, timeout: float = 60.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if value := condition():
            return value
        time.sleep(0.2)
    raise TimeoutError(f"{what} never happened")


@pytest.mark.integration
def test_an_operators_reboot_reaches_the_agent_process_and_the_device_comes_back(
    vt_machine, agent_settings, operator, api_client, tmp_path
):
    """A real agent process (a Celery worker on its host's queue), then real beat and worker:
    the API's reboot task goes to the agent's queue, the agent writes the reset file, and
    its polls see the device back."""
    from fleet.redis import get_redis
    from tests.support.processes import Service, child_env, start_beat, start_worker

    sysfs, spec = vt_machine
    env = child_env(
        POLL_INTERVAL="1", FLEET_HOSTS="0", AGENT_HOST="node-a",
        HWMON_ROOT=str(agent_settings.HWMON_ROOT), ASIMOV_SPEC_DIRS=str(spec.parent),
    )
    services_ = [Service("agent", [sys.executable, "-m", "fleet.agent"], env)]
    try:
        services_[0].wait_for_line("ready.", timeout=90)
        wait_until(lambda: Device.objects.filter(device_type="vt100").count() == 3, "the agent's registration")
        device = vt0(sysfs)
        api_client.force_authenticate(operator)
        response = api_client.post(f"/api/devices/{device.id}/actions/", {"action": "reboot"}, format="json")
        assert response.status_code in (200, 201, 202), response.content
        wait_until(lambda: (sysfs / "vt0" / "reset").read_text() == "1", "the agent's reset write")
        action = Action.objects.get(device=device, kind=ActionKind.REBOOT)
        assert wait_until(lambda: Action.objects.get(pk=action.pk).status == ActionStatus.ISSUED, "issued")
        assert (sysfs / "vt1" / "reset").read_text() == "0\n"

        # The central stack: beat and a worker send the host's polls to the agent's queue.
        services_.append(start_worker(env, concurrency=1))
        services_.append(start_beat(env, tmp_path / "beat-schedule"))
        wait_until(lambda: Device.objects.get(pk=device.pk).state == DeviceState.IN_SERVICE, "back in service")
        assert Action.objects.get(pk=action.pk).status == ActionStatus.SUCCEEDED
    finally:
        for service in reversed(services_):
            service.stop()
            print(f"--- {service.name}\n{service.output()}")  # shown when the test fails
        from django.conf import settings

        get_redis().delete(queues.agent_queue_name("node-a"), settings.CELERY_TASK_DEFAULT_QUEUE)
