"""What of the fleet needs a person, as alerts (run by beat every poll interval; ALERTMANAGER_URL).

- **AsicmonDeviceNeedsPerson** (page): the repair ladder had no rung left that could run
  there; the device is drained until someone looks.
- **AsicmonDeviceDrained** (ticket): drained by an operator or the policy; jobs no longer
  land on it (and its node is drained in the scheduler).
- **AsicmonRepairOverdue** (page): under repair past its rung's deadline (LADDER_CHECK_TIMEOUT_S):
  its host did not come back, or its check never passed.
- **AsicmonDevicePulled** (ticket): out of service for inspection (repeats past the attempt
  budget, or sent to repair).
- **AsicmonAutomationPaused** (page): the breaker (or an operator) paused automation.
- **AsicmonUnknownErrorCode** (ticket): a driver error code the catalogue does not know,
  seen in the last day: nothing was done about it.

Each carries its runbook. What was firing is kept in Redis, so an alert that stops is sent
once more, resolved.
"""

from __future__ import annotations

import json
import logging
from datetime import datetime, timedelta

from django.conf import settings
from django.utils import timezone

from fleet import redis as fleet_redis
from fleet.alerts.alertmanager import Alert, AlertmanagerError, payload, post
from fleet.choices import ActionStatus, DeviceState
from fleet.durations import human_duration
from fleet.models import Action, Automation, Device, DriverError

log = logging.getLogger(__name__)

RUNBOOKS = {
    "AsicmonDeviceNeedsPerson": "Read the device's driver errors and the ladder's last rung on its page; fix or replace "
                                "it, then Return to service (its node is resumed once every device is back).",
    "AsicmonDeviceDrained": "Find who or what drained it on the device's page (Actions); when its cause is gone, "
                            "Return to service.",
    "AsicmonRepairOverdue": "Check the host: did it come back from its reboot, does the driver load? If the host is "
                            "gone, send the device to repair; if it is back, see why its check fails.",
    "AsicmonDevicePulled": "Open a hardware ticket (RMA) with the device's error history from its page; Return to "
                           "service once replaced.",
    "AsicmonAutomationPaused": "Too many devices were taken at once: look for a fleet-wide cause (a driver or firmware "
                               "rollout, power, cooling) before resuming automation on the fleet page.",
    "AsicmonUnknownErrorCode": "Read the raw line on the driver errors page; add the code to the catalogue if it is "
                               "real, or ignore it.",
}


def _alert(name: str, severity: str, labels: dict, summary: str, description: str) -> Alert:
    return Alert(name, {"severity": severity, **{k: str(v) for k, v in labels.items()}},
                 {"summary": summary, "description": description, "runbook": RUNBOOKS[name]})


def firing(now: datetime | None = None) -> list[Alert]:
    """Every alert that holds now."""
    now = now or timezone.now()
    alerts = []
    watched = (DeviceState.DRAINED, DeviceState.REPAIR, DeviceState.UNDER_REPAIR)
    devices = list(Device.objects.select_related("host").filter(state__in=watched, absent_since__isnull=True))
    latest = {}
    for action in Action.objects.filter(device__in=devices).order_by("device_id", "-created_at"):
        latest.setdefault(action.device_id, action)
    overdue_after = timedelta(seconds=settings.LADDER_CHECK_TIMEOUT_S)
    for d in devices:
        labels = {"serial": d.serial, "host": d.host.name, "device": d.id, "type": d.device_type}
        last = latest.get(d.id)
        why = (last.reason or last.outcome) if last else "no action recorded"
        if d.state == DeviceState.DRAINED and last and last.status == ActionStatus.NEEDS_PERSON:
            alerts.append(_alert("AsicmonDeviceNeedsPerson", "page", labels, f"{d.serial} on {d.host.name} needs a person",
                                 f"The repair ladder has no rung left that can run there: {why}"))
        elif d.state == DeviceState.DRAINED:
            alerts.append(_alert("AsicmonDeviceDrained", "ticket", labels, f"{d.serial} on {d.host.name} is drained", why))
        elif d.state == DeviceState.REPAIR:
            alerts.append(_alert("AsicmonDevicePulled", "ticket", labels, f"{d.serial} on {d.host.name} is pulled", why))
        elif d.state_changed_at and now - d.state_changed_at > overdue_after:
            waited = human_duration((now - d.state_changed_at).total_seconds())
            alerts.append(_alert("AsicmonRepairOverdue", "page", labels, f"{d.serial} on {d.host.name}: repair overdue",
                                 f"Under repair for {waited}, past its check's {human_duration(overdue_after.total_seconds())}: {why}"))
    automation = Automation.read()
    if automation.paused:
        alerts.append(_alert("AsicmonAutomationPaused", "page", {}, "Asicmon automated remediation is paused",
                             automation.reason or "paused"))
    unknown = (DriverError.objects.filter(known=False, last_seen__gte=now - timedelta(days=1))
               .values_list("host", "vendor", "code", "name").distinct())
    for host, vendor, code, name in sorted(set(unknown)):
        alerts.append(_alert("AsicmonUnknownErrorCode", "ticket", {"host": host, "vendor": vendor, "code": code},
                             f"Unknown {vendor} error code {code} on {host}", name or "not in the catalogue"))
    return alerts


def send(now: datetime | None = None) -> dict[str, int]:
    """Send what fires to ALERTMANAGER_URL (again, as evaluators do), and what stopped, resolved."""
    url = settings.ALERTMANAGER_URL
    if not url:
        return {}
    now = now or timezone.now()
    alerts = firing(now)
    client = fleet_redis.get_redis()
    key = fleet_redis.key("alerts", "firing")
    before = set(json.loads(client.get(key) or "[]"))
    current = {a.key for a in alerts}
    resolved = sorted(before - current)
    hold = timedelta(seconds=max(60.0, 4 * settings.POLL_INTERVAL))
    body = payload(alerts, resolved, now, hold)
    if body:
        try:
            post(url, body)
        except AlertmanagerError as exc:
            log.warning("alerts not delivered: %s", exc)
            return {"firing": len(alerts), "resolved": 0, "failed": 1}
    client.set(key, json.dumps(sorted(current)))
    return {"firing": len(alerts), "resolved": len(resolved)}
