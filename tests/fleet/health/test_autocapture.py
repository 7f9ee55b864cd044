"""Capture when something looks wrong: a device doing much less work than its utilization
says gets a trace captured by itself, linked to its health event; once per device per hour,
and a fleet-wide limit."""

import time

import pytest
from django.utils import timezone

from fleet.health import autocapture
from fleet.hosts import emulated_fleet
from fleet.models import Device, HealthEvent
from fleet.polling import poller
from traces.models import Trace

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def fleet(fleet_settings, clean_redis):
    fleet_settings.PROBE_TIMEOUT = 0.2
    fleet_settings.AUTOCAPTURE_MAX_PER_HOUR = 2
    emulated_fleet.seed_fleet()
    return list(Device.objects.for_dashboard())


def poll_all():
    cycle = time.time()
    for shard in poller.shards():
        poller.poll_shard(shard, cycle)


@pytest.mark.slow  # a real-time capture the health service starts
def test_a_slow_device_gets_a_trace_linked_to_its_health_event(fleet):
    video = next(d for d in fleet if d.device_type == "video")
    for _ in range(14):  # the slow-work baseline of every device
        poll_all()
        time.sleep(0.2)
    emulated_fleet.host_monitor(video.host.name).inject_fault(video.serial, "pcie_degraded")
    deadline = time.time() + 60
    while time.time() < deadline and not HealthEvent.objects.filter(device=video, rule="slow_work").exists():
        poll_all()
        time.sleep(0.3)
    event = HealthEvent.objects.get(device=video, rule="slow_work")
    assert "of what its utilization gives" in event.reason
    assert event.trace_id is not None
    trace = Trace.objects.get(pk=event.trace_id)
    assert trace.device_id == video.id and trace.created_by is None
    assert Trace.objects.count() == 1  # only the slow device


def event(device, rule="slow_work"):
    return HealthEvent.objects.create(device=device, rule=rule, level="warning", reason="slow", started_at=timezone.now())


def test_at_most_one_capture_per_device_per_hour_and_a_fleet_wide_limit(fleet):
    a, b, c = [d for d in fleet if d.device_type in {"video", "inference"}][:3]
    first = autocapture.capture_for(event(a))
    assert first is not None
    HealthEvent.objects.filter(device=a).update(ended_at=timezone.now())
    Trace.objects.filter(pk=first).update(status="ready")  # done, so the device is free again
    assert autocapture.capture_for(event(a)) is None  # within the hour
    assert autocapture.capture_for(event(b)) is not None
    assert autocapture.capture_for(event(c)) is None  # the fleet's two this hour are taken
    assert Trace.objects.count() == 2
    assert autocapture.capture_for(event(a, rule="cooling")) is None  # only performance rules capture
