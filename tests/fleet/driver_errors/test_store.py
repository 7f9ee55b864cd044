"""Error events through a real poll: an injected cascade reaches the database as classified,
deduplicated rows; a flood is one row with its count; repeats across polls add to it."""

import time

import pytest

from fleet.hosts import emulated_fleet
from fleet.models import Device, DriverError
from fleet.polling import poller
from fleet.polling.sharding import shard_of_host

pytestmark = [pytest.mark.django_db(transaction=True)]


def _poll(device: Device, when: float) -> None:
    poller.poll_shard(shard_of_host(device.host_id), poller.current_cycle(when))


def test_an_injected_cascade_is_stored_classified_and_deduplicated(seeded_fleet):
    gpu = next(d for d in seeded_fleet if d.device_type == "gpu")
    monitor = emulated_fleet.host_monitor(gpu.host.name)
    _poll(gpu, time.time())
    monitor.inject_fault(gpu.serial, "xid_95")  # 200 identical lines
    monitor.inject_fault(gpu.serial, "xid_48")
    time.sleep(1.1)
    _poll(gpu, time.time())
    rows = {r.code: r for r in DriverError.objects.filter(serial=gpu.serial)}
    assert set(rows) == {"95", "48", "63"}
    assert rows["95"].count == 200 and rows["95"].action == "reset_device" and rows["95"].name == "Uncontained ECC error"
    assert rows["48"].device_id == gpu.id and rows["48"].host == gpu.host.name and rows["48"].known
    assert rows["48"].raw.endswith("partition 1, subpartition 0.") and "NVRM: Xid (PCI:" in rows["48"].raw
    monitor.inject_fault(gpu.serial, "xid_95")  # the same again, in the same bucket
    _poll(gpu, time.time() + 0.5)
    assert DriverError.objects.get(serial=gpu.serial, code="95").count == 400


def test_amd_like_events_are_classified_by_amds_catalogue(seeded_fleet):
    npu = next(d for d in seeded_fleet if d.device_type == "inference")
    monitor = emulated_fleet.host_monitor(npu.host.name)
    monitor.inject_fault(npu.serial, "amd_ring_timeout")
    _poll(npu, time.time())
    row = DriverError.objects.get(serial=npu.serial)
    assert (row.vendor, row.code, row.action) == ("amd", "ring_timeout", "restart_application")


def test_errors_are_kept_for_the_retention_days_then_pruned_by_the_periodic_task(seeded_fleet, settings):
    from datetime import UTC, datetime, timedelta

    from dashboard.celery import app
    from fleet import tasks
    from fleet.asicmon.errors import ErrorEvent, classify
    from fleet.driver_errors import store
    from fleet.driver_errors.store import record_events

    settings.DRIVER_ERROR_RETENTION_DAYS = 180
    gpu = next(d for d in seeded_fleet if d.device_type == "gpu")
    now = datetime.now(tz=UTC)
    ages = {"79": 400, "48": 181, "95": 179, "13": 1}  # days since first seen
    events = [classify(ErrorEvent("nvidia", code, f"xid {code}", (now - timedelta(days=days)).timestamp(),
                                  address="0000:3b:00"), "nvidia_xid") for code, days in ages.items()]
    record_events(gpu.host.name, {gpu.serial: events}, {gpu.serial: gpu.id})
    store.PRUNE_BATCH, batch = 1, store.PRUNE_BATCH  # batches: a long backlog in short statements
    try:
        assert tasks.prune_driver_errors.apply().get() == 2
    finally:
        store.PRUNE_BATCH = batch
    assert set(DriverError.objects.values_list("code", flat=True)) == {"95", "13"}
    assert store.prune() == 0
    assert tasks.prune_driver_errors.name == "fleet.tasks.prune_driver_errors"
    app.finalize()
    schedule = app.conf.beat_schedule["prune-driver-errors"]
    assert schedule["task"] == tasks.prune_driver_errors.name and schedule["schedule"] <= 86400


def test_one_xid_read_from_the_kernel_log_and_from_nvml_is_one_row(seeded_fleet):
    """Found here: the agent reads an Xid from /dev/kmsg and from NVML's event set; each
    stored a row of its own (two rows, two triggers of the ladder for one fault)."""
    from fleet.asicmon.errors.catalogue import classify
    from fleet.asicmon.errors.events import ErrorEvent
    from fleet.driver_errors.store import record_events

    device = seeded_fleet[0]
    now = time.time()
    kmsg = classify(ErrorEvent("nvidia", "79", "GPU has fallen off the bus.", now, source="kmsg", address="0000:3b:00",
                               raw="NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus."))
    nvml = classify(ErrorEvent("nvidia", "79", "NVML critical XID event", now + 0.4, source="nvml"))
    later = classify(ErrorEvent("nvidia", "79", "NVML critical XID event", now + 600, source="nvml"))
    ids = {device.serial: device.id}
    assert len(record_events(device.host.name, {device.serial: [kmsg]}, ids)) == 1
    assert record_events(device.host.name, {device.serial: [nvml]}, ids) == []  # the same fault
    (row,) = DriverError.objects.filter(serial=device.serial, code="79")
    assert (row.source, row.count, row.raw.startswith("NVRM: Xid")) == ("kmsg+nvml", 1, True)
    assert len(record_events(device.host.name, {device.serial: [later]}, ids)) == 1  # another one, ten minutes on
