"""The fleet's alerts through a real Alertmanager to a webhook: a drained device, one that
needs a person, a pulled one, a repair overdue, automation paused, an unknown error code;
resolved when they stop; a silence holds one back; nothing sent without ALERTMANAGER_URL."""

from __future__ import annotations

import json
import time
import urllib.request
from datetime import UTC, datetime, timedelta

import pytest

from fleet.alerts import rules
from fleet.choices import ActionKind, ActionStatus, DeviceState
from fleet.models import Action, Automation, Device, DriverError
from tests.support.alertmanager import alertmanager, webhook

pytestmark = [pytest.mark.integration, pytest.mark.django_db]


@pytest.fixture
def delivered(tmp_path, settings, clean_redis):
    with webhook() as hook, alertmanager(tmp_path, hook.url) as url:
        settings.ALERTMANAGER_URL = url
        hook.alertmanager = url
        yield hook


def _names(alerts, status="firing") -> set[tuple[str, str]]:
    return {(labels["alertname"], labels.get("serial", labels.get("code", ""))) for s, labels, _ in alerts if s == status}


def test_what_needs_a_person_reaches_the_webhook_and_leaves_it_resolved(seeded_fleet, delivered, settings):
    drained, person, pulled, overdue = seeded_fleet[:4]
    now = datetime.now(tz=UTC)
    Device.objects.filter(pk=drained.pk).update(state=DeviceState.DRAINED)
    Action.objects.create(device=drained, kind=ActionKind.DRAIN, status=ActionStatus.SUCCEEDED, reason="noisy fan")
    Device.objects.filter(pk=person.pk).update(state=DeviceState.DRAINED)
    Action.objects.create(device=person, kind=ActionKind.DRAIN, status=ActionStatus.NEEDS_PERSON,
                          reason="Xid 79: no rung left that can run here")
    Device.objects.filter(pk=pulled.pk).update(state=DeviceState.REPAIR)
    Device.objects.filter(pk=overdue.pk).update(state=DeviceState.UNDER_REPAIR,
                                                state_changed_at=now - timedelta(seconds=settings.LADDER_CHECK_TIMEOUT_S + 60))
    Automation.objects.update_or_create(pk=1, defaults={"paused": True, "reason": "breaker: 4 devices in 10 min"})
    DriverError.objects.create(serial="", host="node-9", vendor="nvidia", code="999", name="unknown Xid 999",
                               severity="unknown", action="inspect", known=False, first_seen=now, last_seen=now,
                               bucket=0, fingerprint="f")
    began = time.monotonic()
    assert rules.send() == {"firing": 6, "resolved": 0}
    expected = {("AsicmonDeviceDrained", drained.serial), ("AsicmonDeviceNeedsPerson", person.serial),
                ("AsicmonDevicePulled", pulled.serial), ("AsicmonRepairOverdue", overdue.serial),
                ("AsicmonAutomationPaused", ""), ("AsicmonUnknownErrorCode", "999")}
    alerts = delivered.wait_for(lambda got: _names(got) >= expected)
    took = time.monotonic() - began
    by_name = {labels["alertname"]: (labels, notes) for _s, labels, notes in alerts}
    labels, notes = by_name["AsicmonDeviceNeedsPerson"]
    assert labels["severity"] == "page" and labels["host"] == person.host.name
    assert "no rung left" in notes["description"] and notes["runbook"].startswith("Read the device's driver errors")
    assert by_name["AsicmonDeviceDrained"][1]["description"] == "noisy fan"
    assert "Under repair for" in by_name["AsicmonRepairOverdue"][1]["description"]
    print(f"drained -> alert at the webhook: {took:.1f} s")

    Device.objects.filter(pk=drained.pk).update(state=DeviceState.IN_SERVICE)
    assert rules.send() == {"firing": 5, "resolved": 1}
    delivered.wait_for(lambda got: ("AsicmonDeviceDrained", drained.serial) in _names(got, "resolved"))


def test_a_silence_holds_an_alert_back(seeded_fleet, delivered):
    silence = {"matchers": [{"name": "alertname", "value": "AsicmonDevicePulled", "isRegex": False}],
               "startsAt": datetime.now(tz=UTC).isoformat(), "endsAt": (datetime.now(tz=UTC) + timedelta(hours=1)).isoformat(),
               "createdBy": "sre", "comment": "known: RMA open"}
    request = urllib.request.Request(f"{delivered.alertmanager}/api/v2/silences", data=json.dumps(silence).encode(),
                                     headers={"Content-Type": "application/json"}, method="POST")
    urllib.request.urlopen(request, timeout=5).read()
    Device.objects.filter(pk=seeded_fleet[0].pk).update(state=DeviceState.REPAIR)
    Device.objects.filter(pk=seeded_fleet[1].pk).update(state=DeviceState.DRAINED)
    rules.send()
    delivered.wait_for(lambda got: ("AsicmonDeviceDrained", seeded_fleet[1].serial) in _names(got))
    time.sleep(2)  # two group intervals: a pulled alert would have come by now
    assert ("AsicmonDevicePulled", seeded_fleet[0].serial) not in _names(delivered.alerts())


def test_nothing_is_sent_without_an_alertmanager(seeded_fleet, settings):
    settings.ALERTMANAGER_URL = ""
    Device.objects.filter(pk=seeded_fleet[0].pk).update(state=DeviceState.DRAINED)
    assert rules.send() == {}
    assert [a.name for a in rules.firing()] == ["AsicmonDeviceDrained"]
