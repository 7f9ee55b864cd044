"""The health events API carries the devices' driver errors as events of rule driver_error,
merged with the health rules' events newest first, filtered and paginated alike."""

from datetime import timedelta

import pytest
from django.utils import timezone

from fleet.choices import ActionKind, ActionStatus, Rung
from fleet.models import Action, DriverError, HealthEvent

pytestmark = pytest.mark.django_db


def driver_error(device, code, name, severity, at, *, count=1, handled_by=None, fingerprint="f"):
    return DriverError.objects.create(
        device=device, serial=device.serial if device else "", host="host-00", vendor="nvidia", code=code,
        name=name, meaning=f"what {code} means", severity=severity, action="reset_device", cause="memory",
        hardware=True, count=count, first_seen=at, last_seen=at + timedelta(seconds=30), bucket=int(at.timestamp()),
        fingerprint=fingerprint + code, handled_by=handled_by)


@pytest.fixture
def mixed(polled_fleet):
    DriverError.objects.all().delete()
    HealthEvent.objects.all().delete()
    now = timezone.now()
    a, b = polled_fleet[0], polled_fleet[1]
    reset = Action.objects.create(device=a, kind=ActionKind.REBOOT, status=ActionStatus.SUCCEEDED, rule="driver_error",
                                  reason="Xid 48", rung=Rung.RESET_DEVICE, check_passed=True, check_detail="diag passed")
    HealthEvent.objects.create(device=a, rule="driver", level="critical", reason="driver hung", started_at=now)
    driver_error(a, "48", "DBE", "critical", now - timedelta(minutes=1), count=812, handled_by=reset)
    HealthEvent.objects.create(device=a, rule="pcie", level="warning", reason="PCIe link degraded",
                               started_at=now - timedelta(minutes=5), ended_at=now)
    driver_error(a, "13", "Graphics engine exception", "info", now - timedelta(minutes=7))
    driver_error(b, "79", "Fallen off the bus", "critical", now - timedelta(minutes=2))
    driver_error(None, "95", "Uncontained ECC", "critical", now - timedelta(minutes=3))  # no device of ours
    return a, b, reset


def test_a_devices_driver_errors_are_health_events_newest_first(api_client, viewer, mixed):
    a, _, reset = mixed
    api_client.force_authenticate(viewer)
    body = api_client.get("/api/health-events/", {"device": a.id}).json()
    assert body["count"] == 4
    assert [(e["rule"], e["reason"]) for e in body["results"]] == [
        ("driver", "driver hung"), ("driver_error", "nvidia 48 DBE"),
        ("pcie", "PCIe link degraded"), ("driver_error", "nvidia 13 Graphics engine exception")]
    dbe = body["results"][1]
    assert dbe["id"] is None and dbe["driver_error"] == DriverError.objects.get(code="48").id
    assert dbe["level"] == "critical" and dbe["open"] is False and dbe["serial"] == a.serial
    assert dbe["values"]["count"] == 812 and dbe["values"]["meaning"] == "what 48 means"
    assert dbe["values"]["rung"] == Rung.RESET_DEVICE and dbe["values"]["action_id"] == reset.id
    assert dbe["values"]["check_passed"] is True and dbe["values"]["check_detail"] == "diag passed"
    rule_event = body["results"][0]
    assert set(rule_event) == set(dbe) and rule_event["driver_error"] is None and isinstance(rule_event["id"], int)
    assert body["results"][3]["level"] == "warning"  # an info-class code is no critical event


def test_filters_and_pages_cover_both(api_client, viewer, mixed):
    api_client.force_authenticate(viewer)

    def rules(**query):
        return [(e["rule"], e["reason"]) for e in api_client.get("/api/health-events/", query).json()["results"]]

    assert rules(open="true") == [("driver", "driver hung")]  # a driver error is over by its last line
    assert rules(level="critical") == [("driver", "driver hung"), ("driver_error", "nvidia 48 DBE"),
                                       ("driver_error", "nvidia 79 Fallen off the bus")]
    everything = rules()
    assert len(everything) == 5  # the one of no device of ours is left out
    pages = rules(limit=2) + rules(limit=2, offset=2) + rules(limit=2, offset=4)
    assert pages == everything
    assert api_client.get("/api/health-events/", {"level": "fine"}).status_code == 400
    assert api_client.get("/api/health-events/", {"device": "x"}).status_code == 400
