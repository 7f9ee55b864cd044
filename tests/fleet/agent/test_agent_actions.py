"""Actions on a real machine's devices: no reboot is declared by the nvml and hwmon specs, so
remediation goes straight to repair and an operator's reboot is refused with the reason."""

import time

import pytest

from fleet.agent import queues
from fleet.agent.discovery import agent_host
from fleet.agent.registration import register_host
from fleet.choices import ActionKind, DeviceState
from fleet.models import Action, Device, Host
from fleet.polling import poller

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def node_a(agent_settings, fleet_settings, clean_redis):
    fleet_settings.FLEET_HOSTS = 0
    register_host("node-a", queues.agent_queue_name("node-a"), agent_host().devices)
    return Host.objects.get(name="node-a")


def test_an_overheating_real_device_goes_straight_to_repair(node_a, agent_settings):
    gpu = Device.objects.get(serial__contains=":amdgpu")
    (agent_settings.HWMON_ROOT / "hwmon3" / "temp1_input").write_text("99000\n")
    deadline = time.time() + 20
    while Device.objects.get(pk=gpu.pk).state == DeviceState.IN_SERVICE and time.time() < deadline:
        poller.poll_agent_host(node_a.id, time.time())
        time.sleep(0.2)
    assert Device.objects.get(pk=gpu.pk).state == DeviceState.REPAIR
    action = Action.objects.get(device=gpu)
    assert action.kind == ActionKind.REPAIR
    assert "hwmon spec declares no reboot" in action.reason
    assert not Action.objects.filter(kind=ActionKind.REBOOT).exists()


def test_an_operator_reboot_of_a_real_device_is_refused_with_the_reason(node_a, operator, api_client):
    device = Device.objects.filter(host=node_a).first()
    api_client.force_authenticate(operator)
    response = api_client.post(f"/api/devices/{device.id}/actions/", {"action": "reboot"}, format="json")
    assert response.status_code == 409
    assert "declares no reboot" in response.json()["detail"]
    assert not Action.objects.exists()
    assert Device.objects.get(pk=device.pk).state == DeviceState.IN_SERVICE
