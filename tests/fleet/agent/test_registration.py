"""Registering an agent's host and devices: idempotent, absent not deleted, history kept."""

import time
from datetime import UTC, datetime, timedelta

import pytest

from fleet.agent.registration import HostNameTaken, register_host
from fleet.hosts.local import discover
from fleet.models import Device, Host
from fleet.reading import history
from tests.support.history import write_points
from tests.support.hwmon import write_hwmon_tree

pytestmark = pytest.mark.django_db


def devices_of(tmp_path, host="node-a"):
    return discover(host, hwmon_root=write_hwmon_tree(tmp_path)).host.devices


def history_of(device) -> int:
    """How many temperature samples the store has of ``device`` over the last minute."""
    now = datetime.now(tz=UTC)
    return len(history.read(device.pk, ["temperature_c"], now - timedelta(minutes=1), now)["temperature_c"])


def test_registering_twice_adds_nothing(tmp_path):
    devices = devices_of(tmp_path)
    first = register_host("node-a", "q.host.node-a", devices)
    assert len(first.created) == 3
    slots = dict(Device.objects.values_list("serial", "index"))
    again = register_host("node-a", "q.host.node-a", devices)
    assert (again.created, again.returned, again.absent) == ([], [], [])
    assert Host.objects.count() == 1 and Device.objects.count() == 3
    assert dict(Device.objects.values_list("serial", "index")) == slots
    host = Host.objects.get()
    assert host.agent_queue == "q.host.node-a" and host.has_agent and host.agent_seen_at


def test_a_device_that_disappears_is_absent_keeps_its_samples_and_comes_back(tmp_path):
    devices = devices_of(tmp_path)
    register_host("node-a", "q", devices)
    gone = Device.objects.get(serial="hwmon:node-a:acpitz")
    written = write_points(gone, {"temperature_c": [(time.time() - 10, 27.8)]})

    result = register_host("node-a", "q", [d for d in devices if d.serial != gone.serial])
    assert result.absent == [gone.serial]
    gone.refresh_from_db()
    assert gone.absent_since is not None
    assert history_of(gone) == written

    back = register_host("node-a", "q", devices)
    assert back.returned == [gone.serial]
    refreshed = Device.objects.get(pk=gone.pk)
    assert refreshed.absent_since is None and refreshed.index == gone.index


def test_an_agent_cannot_take_an_emulated_hosts_name(tmp_path, seeded_fleet):
    emulated = seeded_fleet[0].host.name
    with pytest.raises(HostNameTaken, match="AGENT_HOST"):
        register_host(emulated, "q", devices_of(tmp_path, emulated))
    assert not Host.objects.get(name=emulated).has_agent
    assert Device.objects.filter(host__name=emulated).count() == 4


def test_models_are_named_from_the_first_reading(tmp_path):
    found = discover("node-a", hwmon_root=write_hwmon_tree(tmp_path))
    found.host.poll()
    register_host("node-a", "q", found.host.devices)
    assert set(Device.objects.values_list("model", flat=True)) == {"amdgpu", "coretemp", "acpitz"}
    assert set(Device.objects.values_list("device_type", flat=True)) == {"hwmon"}


def test_a_device_that_moved_between_agent_hosts_keeps_its_history(tmp_path):
    devices = devices_of(tmp_path)
    register_host("node-a", "qa", devices)
    moved = Device.objects.get(serial=devices[0].serial)
    written = write_points(moved, {"temperature_c": [(time.time() - 10, 1.0)]})
    result = register_host("node-b", "qb", devices[:1])
    assert result.returned == [moved.serial]
    assert Device.objects.get(pk=moved.pk).host.name == "node-b"
    assert history_of(moved) == written  # the same device: its series, written under node-a, read as its own


def test_an_emulated_devices_serial_is_refused(tmp_path, seeded_fleet):
    emulated = seeded_fleet[0]
    found = devices_of(tmp_path)
    impostor = type(found[0])(emulated.serial, "vt100", found[0].monitor, 0)
    result = register_host("node-a", "q", [*found, impostor])
    assert result.refused == [emulated.serial]
    assert Device.objects.get(serial=emulated.serial).host_id == emulated.host_id
    assert Device.objects.filter(host__name="node-a").count() == 3
