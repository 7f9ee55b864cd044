"""Driver errors through the API (filters, bad input, permissions, the workload label) and
on /metrics (counts by code, dcgm-exporter's XID series)."""

import time

import pytest

from fleet.asicmon.errors import ErrorEvent, classify
from fleet.driver_errors.store import record_events
from fleet.models import Device

pytestmark = [pytest.mark.django_db]


@pytest.fixture
def errors(seeded_fleet):
    gpu = next(d for d in seeded_fleet if d.device_type == "gpu")
    now = time.time()
    events = [classify(ErrorEvent("nvidia", code, f"xid {code}", now + i, address="0000:3a:00", count=n), "nvidia_xid")
              for i, (code, n) in enumerate([("79", 1), ("95", 800), ("43", 2)])]
    record_events(gpu.host.name, {gpu.serial: events}, {gpu.serial: gpu.id})
    return gpu


def test_the_api_lists_filters_and_refuses_bad_input(client, viewer, errors):
    client.force_login(viewer)
    rows = client.get("/api/driver-errors/", {"serial": errors.serial}).json()["results"]
    assert {r["code"]: r["count"] for r in rows} == {"79": 1, "95": 800, "43": 2}
    assert client.get("/api/driver-errors/", {"action": "ignore"}).json()["results"][0]["code"] == "43"
    bad = client.get("/api/driver-errors/", {"action": "explode"})
    assert bad.status_code == 400 and "explode" in bad.json()["action"]
    assert client.get("/api/driver-errors/", {"device": "x"}).status_code == 400
    # an id past what a database integer holds: a 400 saying so (SQLite raised OverflowError: a 500)
    huge = client.get("/api/driver-errors/", {"device": "-2138416747357572845866313580544"})
    assert huge.status_code == 400 and "out of range" in huge.json()["device"]
    assert client.get("/api/driver-errors/", {"device": str(2**63 - 1)}).json()["results"] == []
    offenders = client.get("/api/driver-errors/offenders/").json()["results"]
    assert offenders[0]["serial"] == errors.serial and offenders[0]["hardware_incidents"] == 1


def test_only_operators_set_a_devices_workload(client, viewer, operator, errors):
    url = f"/api/devices/{errors.id}/workload/"
    client.force_login(viewer)
    assert client.put(url, {"workload": "llama-70b"}, content_type="application/json").status_code == 403
    client.force_login(operator)
    assert client.put(url, {"workload": "x" * 200}, content_type="application/json").status_code == 400
    assert client.put(url, {"workload": "llama-70b"}, content_type="application/json").json() == {"workload": "llama-70b"}
    assert Device.objects.get(id=errors.id).workload == "llama-70b"


def test_metrics_count_errors_by_code_beside_dcgms_xid_series(client, errors, settings):
    settings.METRICS_TOKEN = "s3cret"
    text = client.get("/metrics", HTTP_AUTHORIZATION="Bearer s3cret").content.decode()
    assert f'asicmon_driver_errors_total{{host="{errors.host.name}",serial="{errors.serial}",vendor="nvidia",code="95",action="reset_device"}} 800.0' in text
    assert f'DCGM_FI_DEV_XID_ERRORS{{gpu="{errors.index}",UUID="{errors.serial}"' in text
    xid_line = next(line for line in text.splitlines() if line.startswith("DCGM_FI_DEV_XID_ERRORS{"))
    assert xid_line.endswith(" 43.0")  # the last XID the device had
    assert 'xid="95"} 800.0' in text


def _ladder_action(device, rung, status, **fields):
    from fleet.models import Action

    return Action.objects.create(device=device, kind="reboot", rung=rung, status=status, rule="driver_error",
                                 serial=device.serial, cause="memory", **fields)


def test_metrics_count_each_outcome_apart(client, errors, settings):
    settings.METRICS_TOKEN = "s3cret"
    _ladder_action(errors, "reset_device", "succeeded", check_passed=True)
    _ladder_action(errors, "reset_device", "not_validated")
    _ladder_action(errors, "reset_device", "not_validated")
    _ladder_action(errors, "inspect_hardware", "pulled")
    _ladder_action(errors, "restart_application", "skipped")
    text = client.get("/metrics", HTTP_AUTHORIZATION="Bearer s3cret").content.decode()
    assert 'asicmon_ladder_outcomes_total{outcome="repaired_validated"} 1.0' in text
    assert 'asicmon_ladder_outcomes_total{outcome="repaired_not_validated"} 2.0' in text
    assert 'asicmon_ladder_outcomes_total{outcome="pulled_for_inspection"} 1.0' in text
    assert 'asicmon_ladder_outcomes_total{outcome="needs_person"} 0.0' in text
    assert 'asicmon_driver_error_actions_total{rung="inspect_hardware",status="succeeded"}' not in text
    assert 'asicmon_driver_error_actions_total{rung="restart_application",status="skipped"} 1.0' in text


def test_viewers_see_the_rung_and_its_result_operators_the_command(client, viewer, operator, errors):
    action = _ladder_action(errors, "reboot_host", "issued", outcome="AGENT_REBOOT_COMMAND: exit 0",
                            command="reboot-node --token '***'", check_output="Memory | Pass")
    client.force_login(viewer)
    seen = next(a for a in client.get("/api/actions/").json()["results"] if a["id"] == action.id)
    assert seen["rung"] == "reboot_host" and seen["outcome"] == "AGENT_REBOOT_COMMAND: exit 0"
    assert "command" not in seen and "check_output" not in seen
    client.force_login(operator)
    seen = next(a for a in client.get("/api/actions/").json()["results"] if a["id"] == action.id)
    assert seen["command"] == "reboot-node --token '***'" and seen["check_output"] == "Memory | Pass"


def test_the_device_page_says_not_validated_and_shows_the_command_to_operators_only(client, viewer, operator, errors):
    from fleet.models import DriverError

    action = _ladder_action(errors, "restart_application", "not_validated", outcome="AGENT_RESTART_APP_COMMAND: exit 0",
                            command="requeue --token '***'", check_detail="not validated: no diagnostic for gpu")
    DriverError.objects.filter(serial=errors.serial, code="95").update(handled_by=action)
    client.force_login(viewer)
    page = client.get(f"/devices/{errors.id}/").content.decode()
    assert "not validated" in page and "Repaired, not validated" in page
    assert "requeue --token" not in page
    client.force_login(operator)
    assert "requeue --token &#x27;***&#x27;" in client.get(f"/devices/{errors.id}/").content.decode()


def test_unknown_codes_are_surfaced_for_a_person_and_counted_never_ignored(client, viewer, seeded_fleet, settings):
    from fleet.driver_errors.ladder import handle_incidents
    from fleet.models import Action, DriverError

    gpu = next(d for d in seeded_fleet if d.device_type == "gpu")
    raw = "NVRM: Xid (PCI:0000:3a:00): 201, pid=7, name=python3, Something the catalogue has never seen"
    event = classify(ErrorEvent("nvidia", "201", "Something the catalogue has never seen", time.time(), raw=raw,
                                address="0000:3a:00", count=3), "nvidia_xid")
    record_events(gpu.host.name, {gpu.serial: [event]}, {gpu.serial: gpu.id})
    assert handle_incidents([gpu.id]) == []  # no rung guessed for a code nobody knows
    row = DriverError.objects.get(code="201")
    assert (row.known, row.action, row.raw) == (False, "inspect", raw)
    assert row.outcome == "unknown: inspect (a person reads the raw line)"
    assert not Action.objects.filter(device=gpu).exists() and Device.objects.get(id=gpu.id).state == "in_service"
    client.force_login(viewer)
    (listed,) = client.get("/api/driver-errors/", {"action": "inspect"}).json()["results"]
    assert listed["name"] == "unknown: inspect: nvidia 201" and listed["raw"] == raw
    settings.METRICS_TOKEN = "s3cret"
    text = client.get("/metrics", HTTP_AUTHORIZATION="Bearer s3cret").content.decode()
    assert f'asicmon_driver_errors_unknown_total{{host="{gpu.host.name}",vendor="nvidia",code="201"}} 3.0' in text
