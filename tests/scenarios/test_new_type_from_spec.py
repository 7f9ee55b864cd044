"""A device type onboarded from one spec file (fleet/asimov/specs/mtx.asimov: an MTIA-style
recommendation card, 12 to a host): polled, stored, health-checked, faulted, remediated
and traced, with no Python written for it. The type is opt-in (FLEET_TYPES)."""

import time
from pathlib import Path

import pytest

from emulator.devices.zoo import device_type
from fleet.asimov.loader import SPECS_DIR
from fleet.choices import ActionKind, ActionStatus, DeviceState
from fleet.hosts import emulated_fleet
from fleet.models import Action, Device, HealthEvent
from fleet.polling import poller
from tests.support.tsdb import flush, samples_at

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]  # a whole story: slow tier


@pytest.fixture
def mtx_fleet(settings, tmp_path, clean_redis):
    settings.FLEET_SEED, settings.FLEET_HOSTS, settings.FLEET_DEVICES_PER_HOST = 3, 1, 12
    settings.FLEET_TYPES = ("mtx",)
    settings.POLL_SHARDS = 1
    settings.EMULATOR_STATE_DIR = tmp_path / "emulator"
    settings.EMULATOR_REBOOT_S = 1.0
    settings.REMEDIATION_REBOOT_TIMEOUT_S = 4.0
    settings.PROBE_TIMEOUT = 0.5
    location = tmp_path / "traces"
    settings.STORAGES = {
        **settings.STORAGES,
        "traces": {"BACKEND": "django.core.files.storage.FileSystemStorage", "OPTIONS": {"location": str(location)}},
    }
    settings.TRACE_STORAGE_DIR = location
    emulated_fleet.host_monitor.cache_clear()
    emulated_fleet.seed_fleet()
    yield list(Device.objects.for_dashboard())
    emulated_fleet.host_monitor.cache_clear()


def poll_all():
    cycle = float(int(time.time() * 10) / 10)  # a new key each call; a timestamp the store keeps whole
    for shard in poller.shards():
        poller.poll_shard(shard, cycle)
    return cycle


def poll_until(condition, timeout=20.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        poll_all()
        if condition():
            return
        time.sleep(0.3)
    raise TimeoutError("condition never became true")


def test_the_type_is_one_spec_file():
    spec = SPECS_DIR / "mtx.asimov"
    assert spec.exists() and device_type("mtx").model == "Emu MTX-25"
    python = [p for p in Path(__file__).resolve().parents[2].joinpath("emulator").rglob("*.py") if "mtx" in p.read_text()]
    assert python == []  # nothing in the emulator names it


def test_a_card_is_polled_charted_health_checked_faulted_remediated_and_traced(mtx_fleet, operator):
    from traces import writers
    from traces.choices import TraceStatus

    assert len(mtx_fleet) == 12 and {d.model for d in mtx_fleet} == {"Emu MTX-25"}
    poll_all()
    cycle = poll_all()
    flush(newest=cycle)
    stored = samples_at(cycle, "asicmon_.+")
    assert {int(device) for _, device in stored} == {d.id for d in mtx_fleet}  # charted
    temps = [v[0] for (name, _), v in stored.items() if "temperature" in name and "limit" not in name]
    assert len(temps) == 12 and all(30 < t < 90 for t in temps), sorted({name for name, _ in stored})
    assert set(Device.objects.values_list("state", flat=True)) == {DeviceState.IN_SERVICE}

    slow = mtx_fleet[2]  # a physics fault, with the numbers of the spec's fault line
    emulated_fleet.host_monitor(slow.host.name).inject_fault(slow.serial, "pcie_degraded")
    poll_all()
    warning = HealthEvent.objects.get(device=slow, rule="pcie")
    assert warning.level == "warning" and warning.values["pcie_link_width"] == 4  # link(2, 2, ...): x8 / 2

    hung = mtx_fleet[5]
    emulated_fleet.host_monitor(hung.host.name).inject_fault(hung.serial, "hang")
    poll_all()
    assert Device.objects.get(id=hung.id).state == DeviceState.REBOOTING
    event = HealthEvent.objects.get(device=hung, rule="driver", level="critical")
    assert event.values["driver_status"] == "hung"
    poll_until(lambda: Device.objects.get(id=hung.id).state == DeviceState.IN_SERVICE)
    reboot = Action.objects.get(device=hung, kind=ActionKind.REBOOT)
    assert reboot.status == ActionStatus.SUCCEEDED

    trace = writers.request_capture(mtx_fleet[0], operator, 1)
    writers.run_capture(trace.pk)
    writers.analyse(trace.pk)
    trace.refresh_from_db()
    assert trace.status == TraceStatus.READY, trace.error
    assert trace.events > 0 and trace.device_type == "mtx"
