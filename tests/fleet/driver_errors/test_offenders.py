"""Repeat offenders follow a device's serial across hosts: incidents, MTBI, incidents per 30
days by cause, and the pull recommendation after the Nth hardware incident."""

import pytest

from fleet.asicmon.errors import ErrorEvent, classify
from fleet.driver_errors.offenders import device_record, ranking
from fleet.driver_errors.store import record_events
from fleet.models import Device, Host

pytestmark = [pytest.mark.django_db]

T0 = 1_795_700_000.0


def _error(code: str, at: float, detail: str = "") -> ErrorEvent:
    return classify(ErrorEvent("nvidia", code, detail or f"xid {code}", at, address="0000:3b:00"), "nvidia_xid")


def test_incidents_follow_the_serial_across_a_host_move_and_the_third_hardware_one_flags_it(seeded_fleet, settings):
    settings.OFFENDER_HARDWARE_INCIDENTS = 3
    settings.OFFENDER_WINDOW_S = 10 * 365 * 86400.0
    gpu = next(d for d in seeded_fleet if d.device_type == "gpu")
    other = Host.objects.exclude(id=gpu.host_id).first()
    ids = {gpu.serial: gpu.id}
    # On its first host: a 48 with its 63 (one incident), then an application fault.
    record_events(gpu.host.name, {gpu.serial: [_error("48", T0), _error("63", T0 + 1)]}, ids)
    record_events(gpu.host.name, {gpu.serial: [_error("13", T0 + 3600)]}, ids)
    record_events(gpu.host.name, {gpu.serial: [_error("43", T0 + 3700)]}, ids)  # ignore-class: no incident
    assert not device_record(gpu.serial).pull
    # Moved to another host (as an agent registers it there): its history comes along.
    Device.objects.filter(id=gpu.id).update(host=other, index=9)
    record_events(other.name, {gpu.serial: [_error("74", T0 + 7200)]}, ids)
    record = device_record(gpu.serial)
    assert (record.incidents, record.hardware_incidents, record.pull) == (3, 2, False)
    record_events(other.name, {gpu.serial: [_error("79", T0 + 10800)]}, ids)
    record = device_record(gpu.serial)
    assert (record.incidents, record.hardware_incidents, record.pull) == (4, 3, True)
    assert record.hosts == sorted({gpu.host.name, other.name}) and record.host == other.name
    assert record.mtbi_s == pytest.approx(3600.0)
    assert set(record.per_30_days) == {"memory", "application", "nvlink", "bus"}
    assert "3 hardware incidents" in record.why
    top = ranking()[0]
    assert top.serial == gpu.serial and top.pull


def test_the_ranking_reads_only_the_window_through_the_last_seen_index(seeded_fleet, settings):
    import time

    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    settings.OFFENDER_WINDOW_S = 30 * 86400.0
    gpus = [d for d in seeded_fleet if d.device_type == "gpu"][:2]
    now = time.time()
    old, recent = gpus
    record_events(old.host.name, {old.serial: [_error("79", now - 40 * 86400)]}, {old.serial: old.id})  # before the window
    record_events(recent.host.name, {recent.serial: [_error("48", now - 86400)]}, {recent.serial: recent.id})
    with CaptureQueriesContext(connection) as captured:
        ranked = ranking()
    assert [o.serial for o in ranked] == [recent.serial]  # the old incident is history, not read
    assert device_record(old.serial).incidents == 1  # the device's own record still has it
    reads = [q["sql"].replace('"', "") for q in captured.captured_queries if "fleet_drivererror" in q["sql"]]
    assert reads and all("first_seen >=" in sql for sql in reads), reads  # every read of errors bounded
    read = next(q["sql"] for q in captured.captured_queries if "julianday" in q["sql"] or "date_part" in q["sql"])  # the ranking
    if connection.vendor == "sqlite":
        with connection.cursor() as cursor:
            cursor.execute(f"EXPLAIN QUERY PLAN {read}")
            plan = " ".join(str(row) for row in cursor.fetchall())
        assert "driver_error_window_idx" in plan, plan


def test_the_database_ranks_incidents_as_the_device_record_counts_them(seeded_fleet, settings):
    import time

    settings.OFFENDER_WINDOW_S = 30 * 86400.0
    settings.OFFENDER_INCIDENT_GAP_S = 120.0
    a, b, c = seeded_fleet[:3]
    now = time.time() - 86400
    plan = {
        a: [("48", 0), ("63", 60), ("79", 3600)],  # a 48 and its 63 are one incident; then a 79: 2 hardware
        b: [("13", 0), ("31", 500), ("95", 5000), ("13", 5100)],  # 3 incidents, 1 hardware (95 then 13 within the gap)
        c: [("13", 0), ("13", 100), ("13", 200), ("13", 300)],  # each within the gap of the last: 1 incident
    }
    for device, errors in plan.items():
        record_events(device.host.name, {device.serial: [_error(code, now + t, f"{code} at {t}") for code, t in errors]},
                      {device.serial: device.id})
    ranked = ranking()
    assert [(o.serial, o.hardware_incidents, o.incidents) for o in ranked] == [
        (a.serial, 2, 2), (b.serial, 1, 3), (c.serial, 0, 1)]
    for offender in ranked:
        record = device_record(offender.serial)
        assert (record.incidents, record.hardware_incidents) == (offender.incidents, offender.hardware_incidents)
    assert [o.serial for o in ranking(limit=1)] == [a.serial]
