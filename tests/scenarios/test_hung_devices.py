"""Hung devices on many hosts cost their shard about one probe timeout per cycle, and a
device known hung costs nothing until it answers again (issue 12, defect 2)."""

import time

import pytest

from fleet.hosts import emulated_fleet
from fleet.models import Device, Host
from fleet.polling import poller

pytestmark = [pytest.mark.django_db, pytest.mark.slow]  # a whole story across the fleet and its workers: slow tier

HOSTS = 8
TIMEOUT = 1.0


@pytest.fixture
def many_hosts(fleet_settings, clean_redis):
    fleet_settings.FLEET_HOSTS = HOSTS
    fleet_settings.FLEET_DEVICES_PER_HOST = 2
    fleet_settings.POLL_SHARDS = 1
    fleet_settings.PROBE_TIMEOUT = TIMEOUT
    fleet_settings.POLL_INTERVAL = 30  # slots long enough for the slow first cycle of the old code
    emulated_fleet.seed_fleet()
    return fleet_settings


def hang_one_device_per_host() -> list[str]:
    hung = []
    for host in Host.objects.order_by("name"):
        serial = Device.objects.filter(host=host).order_by("index").values_list("serial", flat=True).first()
        emulated_fleet.host_monitor(host.name).inject_fault(serial, "hang")
        hung.append(serial)
    return hung


def statuses() -> dict[str, str]:
    serial_of = dict(Device.objects.values_list("id", "serial"))
    from fleet.polling import snapshots

    return {serial_of[i]: s["driver_status"] for i, s in snapshots.read_snapshots().items()}


def test_hung_devices_on_every_host_cost_the_shard_about_one_timeout(many_hosts):
    cycle = poller.current_cycle()
    poller.poll_shard(0, cycle - 60)  # warm-up: all healthy
    hung = hang_one_device_per_host()

    newly_hung = poller.poll_shard(0, cycle - 30)
    known_hung = poller.poll_shard(0, cycle)

    # One timeout per host, host after host, would be 8 s.
    assert newly_hung.seconds < 3 * TIMEOUT, newly_hung
    assert known_hung.seconds < TIMEOUT, known_hung
    status = statuses()
    assert {status[s] for s in hung} == {"hung"}
    assert {v for s, v in status.items() if s not in hung} == {"ok"}


def test_a_known_hung_device_is_seen_again_once_it_answers(many_hosts):
    cycle = poller.current_cycle()
    poller.poll_shard(0, cycle - 90)
    hung = hang_one_device_per_host()
    poller.poll_shard(0, cycle - 60)
    for serial in hung:
        host = Device.objects.get(serial=serial).host.name
        emulated_fleet.host_monitor(host).reboot(serial)
    time.sleep(2.5)  # the background probes started before the reboot give up (2 s)
    poller.poll_shard(0, cycle - 30)
    poller.poll_shard(0, cycle)
    status = statuses()
    assert {status[s] for s in hung} <= {"ok", "rebooting"}  # answering again
    assert {v for s, v in status.items() if s not in hung} == {"ok"}
