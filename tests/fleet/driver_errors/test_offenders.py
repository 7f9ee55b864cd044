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
