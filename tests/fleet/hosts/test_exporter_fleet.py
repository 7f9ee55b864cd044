"""An operator joins a fleet running dcgm-exporter by URL (EXPORTER_URLS), no agent per
host: a real HTTP server serves a dcgm-exporter page, one poll cycle registers and polls
its GPUs like any host (samples, snapshots), and an XID series becomes a stored error event
on the right device."""

import pytest
from django.core.exceptions import ImproperlyConfigured

from dashboard.env import env_exporters
from fleet.health import control
from fleet.hosts import emulated_fleet, exporter_fleet
from fleet.models import Action, Device, DriverError, Host
from fleet.polling import poller, snapshots
from fleet.tsdb.series import series_name
from tests.fleet.hosts.test_exporters import UUIDS, Exporter, payload
from tests.support.tsdb import flush, samples_at


@pytest.fixture
def exporter():
    server = Exporter()
    yield server
    server.close()


@pytest.fixture
def exporter_settings(settings, tmp_path, exporter, monkeypatch, clean_redis):
    """No emulated host; one dcgm-exporter endpoint, set the way an operator sets it."""
    settings.FLEET_HOSTS = 0
    settings.POLL_SHARDS = 2
    settings.PROBE_TIMEOUT = 2.0
    settings.EMULATOR_STATE_DIR = tmp_path / "emulator"
    monkeypatch.setenv("EXPORTER_URLS", f"dcgm={exporter.url}")
    settings.EXPORTER_URLS = env_exporters("EXPORTER_URLS")
    exporter_fleet.exporter_monitor.cache_clear()
    exporter_fleet.forget_registrations()
    emulated_fleet.host_monitor.cache_clear()
    yield settings
    exporter_fleet.exporter_monitor.cache_clear()
    exporter_fleet.forget_registrations()


def poll_all(cycle: float) -> list[poller.ShardPollResult]:
    return [poller.poll_shard(shard, cycle) for shard in poller.shards()]


@pytest.mark.django_db(transaction=True)
def test_an_exporter_joins_by_url_and_its_xids_become_error_events(exporter_settings, exporter):
    ((_, _, name),) = exporter_settings.EXPORTER_URLS
    cycle = poller.current_cycle()
    results = poll_all(cycle)

    host = Host.objects.get(name=name)
    assert not host.has_agent
    devices = {d.serial: d for d in Device.objects.filter(host=host)}
    assert list(devices) == UUIDS
    assert {d.device_type for d in devices.values()} == {"gpu"}
    assert devices[UUIDS[0]].model == "NVIDIA H100 80GB HBM3"
    assert sum(r.devices for r in results) == 2 and all(not r.gap for r in results)

    latest = snapshots.read_snapshots()
    busy = latest[devices[UUIDS[1]].id]
    assert busy["driver_status"] == "ok" and busy["temperature_c"] == 63
    assert busy["device_utilization"] == pytest.approx(0.97)
    flush(newest=cycle)
    stored = samples_at(cycle)
    assert stored[(series_name("power_w"), str(devices[UUIDS[1]].id))] == [pytest.approx(652.5)]
    assert DriverError.objects.count() == 0

    exporter.page = payload(values={("DCGM_FI_DEV_XID_ERRORS", 1): 79})
    exporter_fleet.exporter_monitor(name).lib._at = -1e18  # the next cycle reads a fresh page
    poll_all(cycle + exporter_settings.POLL_INTERVAL)
    (error,) = DriverError.objects.all()
    assert (error.device_id, error.serial, error.host) == (devices[UUIDS[1]].id, UUIDS[1], name)
    assert (error.vendor, error.code, error.source) == ("nvidia", "79", "dcgm_exporter")
    # XID 79 asks for a host reboot: an exporter takes no commands, so the rung is skipped, saying why
    reboot = Action.objects.get(device=devices[UUIDS[1]], rung="reboot_host")
    assert reboot.status == "skipped" and "takes no commands" in reboot.outcome
    assert "takes no commands" in control.reboot_unavailable_reason(devices[UUIDS[0]])  # nor an operator's reboot

    poll_all(cycle + 2 * exporter_settings.POLL_INTERVAL)  # a registered fleet is not registered twice
    assert Device.objects.filter(host=host).count() == 2 and Host.objects.count() == 1


@pytest.mark.django_db
def test_an_exporter_that_does_not_answer_registers_nothing_and_holds_up_no_shard(exporter_settings, exporter):
    exporter.close()
    results = poll_all(poller.current_cycle())
    assert all(not r.gap for r in results) and Device.objects.count() == 0
    assert Host.objects.count() == 0


@pytest.mark.parametrize("value, error", [
    ("nvidia=http://h1:9400/metrics", "KIND=URL"),
    ("dcgm http://h1:9400/metrics", "KIND=URL"),
    ("dcgm=ftp://h1/metrics", "http(s) URL"),
    ("dcgm=http://h1:notaport/metrics", "http(s) URL"),
    ("dcgm=http://h1:9400/metrics,amd=http://h1:9400/other", "two exporters"),
])
def test_a_malformed_setting_says_what_is_wrong(monkeypatch, value, error):
    monkeypatch.setenv("EXPORTER_URLS", value)
    with pytest.raises(ImproperlyConfigured, match=error.replace("(", r"\(").replace(")", r"\)")):
        env_exporters("EXPORTER_URLS")


def test_the_setting_names_one_host_per_endpoint(monkeypatch):
    monkeypatch.setenv("EXPORTER_URLS", " dcgm=http://node-1:9400/metrics , amd=https://10.0.0.2/metrics ")
    assert env_exporters("EXPORTER_URLS") == (
        ("dcgm_exporter", "http://node-1:9400/metrics", "node-1-9400"),
        ("amd_exporter", "https://10.0.0.2/metrics", "10.0.0.2-443"),
    )


def with_third_gpu(page: str, uuid: str) -> str:
    """The page with a third GPU, a copy of the second under its own UUID, index and bus."""
    copies = [line.replace(UUIDS[1], uuid).replace('gpu="1"', 'gpu="2"').replace(":19:00.0", ":1A:00.0")
              for line in page.splitlines() if UUIDS[1] in line]
    return page + "\n".join(copies) + "\n"


@pytest.mark.django_db
def test_a_gpu_that_appears_on_the_page_later_joins_and_no_xid_is_reported_twice(exporter_settings, exporter):
    ((_, _, name),) = exporter_settings.EXPORTER_URLS
    interval = exporter_settings.POLL_INTERVAL
    cycle = poller.current_cycle()
    exporter.page = payload(values={("DCGM_FI_DEV_XID_ERRORS", 0): 48})
    poll_all(cycle)
    assert DriverError.objects.filter(serial=UUIDS[0], code="48").count() == 1
    new = "GPU-77777777-0000-4000-8000-000000000003"
    exporter.page = with_third_gpu(payload(values={("DCGM_FI_DEV_XID_ERRORS", 0): 48}), new)
    exporter_fleet.exporter_monitor(name).lib._at = -1e18
    poll_all(cycle + interval)  # reads the page that shows it
    poll_all(cycle + 2 * interval)  # registers it and polls it
    device = Device.objects.get(serial=new)
    assert device.host.name == name and device.index == 2
    assert snapshots.read_snapshots()[device.id]["driver_status"] == "ok"
    assert DriverError.objects.filter(serial=UUIDS[0], code="48").count() == 1  # the XID still on the page


@pytest.mark.django_db
def test_an_exporter_its_spec_cannot_read_holds_up_no_shard(exporter_settings, exporter, fleet_settings):
    emulated_fleet.seed_fleet()  # emulated hosts share the shards with it
    exporter_settings.EXPORTER_URLS = (("no_such_spec", exporter.url, "broken-9400"),)
    results = poll_all(poller.current_cycle())
    assert all(not r.gap for r in results)
    assert sum(r.devices for r in results) == Device.objects.count() > 0  # the emulated ones, polled
    assert not Host.objects.filter(name="broken-9400").exists()


def without_gpu(page: str, uuid: str) -> str:
    return "".join(line for line in page.splitlines(keepends=True) if uuid not in line)


@pytest.mark.django_db
def test_a_gpu_gone_from_the_page_is_absent_unprobed_and_present_again_when_it_returns(exporter_settings, exporter):
    ((_, _, name),) = exporter_settings.EXPORTER_URLS
    interval = exporter_settings.POLL_INTERVAL
    cycle = poller.current_cycle()
    poll_all(cycle)
    gone = Device.objects.get(serial=UUIDS[1])
    before = snapshots.read_snapshots()[gone.id]["sample_ts"]

    exporter.page = without_gpu(payload(), UUIDS[1])  # the driver lost it: dcgm-exporter lists it no more
    exporter_fleet.exporter_monitor(name).lib._at = -1e18
    poll_all(cycle + interval)  # reads the page without it
    poll_all(cycle + 2 * interval)  # registration sees it gone
    gone.refresh_from_db()
    assert gone.absent_since is not None
    assert Device.objects.get(serial=UUIDS[0]).absent_since is None
    latest = snapshots.read_snapshots()
    assert latest[gone.id]["sample_ts"] == before  # not probed: no failing snapshot, no health verdict on it
    assert latest[Device.objects.get(serial=UUIDS[0]).id]["sample_ts"] > before
    assert not DriverError.objects.exists() and not Action.objects.filter(device=gone).exists()

    exporter.page = payload()
    exporter_fleet.exporter_monitor(name).lib._at = -1e18
    poll_all(cycle + 3 * interval)
    poll_all(cycle + 4 * interval)
    gone.refresh_from_db()
    assert gone.absent_since is None
    assert snapshots.read_snapshots()[gone.id]["sample_ts"] > before


@pytest.mark.django_db
def test_no_trace_is_captured_on_an_exporter_s_gpus(exporter_settings, exporter, admin_user):
    from traces.writers import CaptureUnavailable, request_capture

    poll_all(poller.current_cycle())
    device = Device.objects.get(serial=UUIDS[0])
    with pytest.raises(CaptureUnavailable, match="metrics exporter.*cannot capture traces"):
        request_capture(device, admin_user, 2.0)
    from traces.models import Trace

    assert not Trace.objects.exists()
