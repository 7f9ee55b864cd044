"""An agent host is polled by its agent, through the same poll service; beat routes it."""

import pytest

from fleet.agent import queues
from fleet.agent.discovery import agent_host
from fleet.agent.registration import register_host
from fleet.models import Device, Host
from fleet.polling import poller, snapshots
from fleet.redis import get_redis
from fleet.tasks import poll_fleet
from fleet.tsdb.series import series_name
from tests.support.tsdb import flush, samples_at

pytestmark = pytest.mark.django_db


@pytest.fixture
def agent_registered(agent_settings, seeded_fleet):
    register_host("node-a", queues.agent_queue_name("node-a"), agent_host().devices)
    return Host.objects.get(name="node-a")


def test_the_agent_polls_its_host_into_samples_and_snapshots(agent_registered):
    cycle = poller.current_cycle()
    result = poller.poll_agent_host(agent_registered.id, cycle)
    ids = set(Device.objects.filter(host=agent_registered).values_list("id", flat=True))
    assert result.devices == 3
    latest = snapshots.read_snapshots(list(ids))
    assert set(latest) == ids
    assert all(s["driver_status"] == "ok" and s["cycle"] == cycle for s in latest.values())
    flush(newest=cycle)
    written = samples_at(cycle)
    assert {int(device) for _, device in written} == ids
    assert len(written) == result.samples > 0
    assert {s.labels["host"] for s in flush_and_read(cycle)} == {"node-a"}
    # A sensor chip has no memory: no sample at all, rather than a zero.
    sensor = Device.objects.get(serial="hwmon:node-a:coretemp.0:coretemp")
    names = {name for name, device in written if device == str(sensor.id)}
    assert series_name("temperature_c") in names and series_name("memory_used_bytes") not in names
    # The same cycle again writes nothing twice.
    poller.poll_agent_host(agent_registered.id, cycle)
    flush(newest=cycle)
    again = samples_at(cycle)
    assert set(again) == set(written) and all(len(values) == 1 for values in again.values())


def flush_and_read(cycle: float):
    from tests.support.tsdb import raw_samples

    flush(newest=cycle)
    return raw_samples(cycle - 1, cycle, "asicmon_.+")


def test_shard_polls_leave_agent_hosts_to_their_agents(agent_registered, seeded_fleet):
    cycle = poller.current_cycle()
    polled = sum(poller.poll_shard(shard, cycle).devices for shard in poller.shards())
    assert polled == len(seeded_fleet)
    assert "node-a" not in {s.labels["host"] for s in flush_and_read(cycle)}


def test_an_agent_refuses_another_hosts_poll(agent_settings, seeded_fleet):
    emulated = seeded_fleet[0].host
    with pytest.raises(poller.MisroutedPoll, match="node-a"):
        poller.poll_agent_host(emulated.id, poller.current_cycle())


def test_beat_sends_an_agent_hosts_poll_to_its_queue_only_while_it_is_alive(agent_registered, settings):
    queue = queues.agent_queue_name("node-a")
    redis = get_redis()
    redis.delete(queue, settings.CELERY_TASK_DEFAULT_QUEUE)
    try:
        poll_fleet(poller.current_cycle())
        assert redis.llen(queue) == 1
        assert redis.llen(settings.CELERY_TASK_DEFAULT_QUEUE) == settings.POLL_SHARDS

        # An agent not seen for longer than the window gets nothing more to pile up.
        stale = agent_registered.agent_seen_at - queues.agent_alive_window() * 2
        Host.objects.filter(pk=agent_registered.pk).update(agent_seen_at=stale)
        poll_fleet(poller.current_cycle())
        assert redis.llen(queue) == 1
    finally:
        redis.delete(queue, settings.CELERY_TASK_DEFAULT_QUEUE)


def test_work_for_a_host_goes_where_its_devices_are(agent_registered, seeded_fleet, settings):
    emulated = seeded_fleet[0].host
    assert queues.host_queue(emulated) == settings.CELERY_TASK_DEFAULT_QUEUE
    assert queues.host_queue(agent_registered) == f"{settings.CELERY_TASK_DEFAULT_QUEUE}.host.node-a"
    assert queues.capture_unavailable_reason(emulated) is None
    assert "no PyTorch process on node-a polls its agent: start the job with KINETO_USE_DAEMON=1" in (
        queues.capture_unavailable_reason(agent_registered))


def test_pages_say_not_reported_for_counters_a_device_cannot_give(agent_registered, viewer, client):
    poller.poll_agent_host(agent_registered.id, poller.current_cycle())
    sensor = Device.objects.get(serial="hwmon:node-a:coretemp.0:coretemp")
    client.force_login(viewer)
    fleet = client.get("/").content.decode()
    row = fleet.split(f'data-device-id="{sensor.id}"', 1)[1].split("</tr>", 1)[0]
    assert "48.0 °C" in row
    assert row.count("not reported") == 3  # utilization, power, memory
    page = client.get(f"/devices/{sensor.id}/").content.decode()
    assert "<code>ecc_corrected_total</code></td><td class=\"num\">not reported" in page
    assert "polled by its agent" in fleet


def test_a_real_machine_without_a_pytorch_process_offers_no_capture_and_says_why(agent_registered, operator, api_client, client):
    from traces.models import Trace

    device = Device.objects.filter(host=agent_registered).first()
    api_client.force_authenticate(operator)
    response = api_client.post(f"/api/devices/{device.id}/capture/", {"duration_s": 2}, format="json")
    assert response.status_code == 409
    assert "no PyTorch process on device" in response.json()["detail"] and "KINETO_USE_DAEMON=1" in response.json()["detail"]
    assert not Trace.objects.exists()

    client.force_login(operator)
    page = client.get(f"/devices/{device.id}/").content.decode()
    assert 'id="capture-button"' not in page
    assert 'id="capture-unavailable"' in page and "KINETO_USE_DAEMON=1" in page
    emulated = Device.objects.exclude(host=agent_registered).first()
    assert 'id="capture-button"' in client.get(f"/devices/{emulated.id}/").content.decode()


def test_looking_again_drops_a_vanished_device_and_keeps_the_others_monitors(agent_registered, agent_settings):
    from fleet.agent.discovery import rediscover

    before = {d.serial: d.monitor for d in agent_host().devices}
    (agent_settings.HWMON_ROOT / "hwmon0").unlink()  # acpitz leaves
    after = rediscover().host
    assert set(after.serials) == set(before) - {"hwmon:node-a:acpitz"}
    assert all(after.monitor(s) is before[s] for s in after.serials)  # rates carry on
    result = register_host("node-a", queues.agent_queue_name("node-a"), after.devices)
    assert result.absent == ["hwmon:node-a:acpitz"]
    gone = Device.objects.get(serial="hwmon:node-a:acpitz")
    assert gone.absent_since is not None


def test_the_device_page_says_a_device_is_absent(agent_registered, agent_settings, viewer, client):
    from fleet.agent.discovery import rediscover

    (agent_settings.HWMON_ROOT / "hwmon0").unlink()
    register_host("node-a", queues.agent_queue_name("node-a"), rediscover().host.devices)
    client.force_login(viewer)
    gone = Device.objects.get(serial="hwmon:node-a:acpitz")
    page = client.get(f"/devices/{gone.id}/").content.decode()
    assert 'id="device-absent"' in page and "no longer finds it" in page
    present = Device.objects.get(serial="hwmon:node-a:coretemp.0:coretemp")
    page = client.get(f"/devices/{present.id}/").content.decode()
    assert 'id="device-absent"' not in page and "polled by its agent" in page


@pytest.mark.skipif(
    not __import__("shutil").which("nvidia-smi"),
    reason="no NVIDIA GPU or driver on this machine (nvidia-smi not found): the agent's NVML read is not tested here",
)
def test_the_agent_reads_this_machines_nvidia_gpus(agent_settings, clean_redis):
    register_host("node-a", queues.agent_queue_name("node-a"), agent_host().devices)
    gpus = list(Device.objects.filter(device_type="nvml"))
    assert gpus, "nvidia-smi is here but the agent found no GPU"
    host = Host.objects.get(name="node-a")
    cycle = poller.current_cycle()
    poller.poll_agent_host(host.id, cycle)
    flush(newest=cycle)
    written = samples_at(cycle)
    for gpu in gpus:
        snap = snapshots.read_snapshot(gpu.id)
        print(gpu.serial, gpu.model, {k: v for k, v in snap.items() if v is not None})  # the closing note's figures
        assert gpu.serial.startswith("GPU-")
        assert snap["driver_status"] == "ok" and snap["memory_total_bytes"] > 0
        assert (series_name("temperature_c"), str(gpu.id)) in written
