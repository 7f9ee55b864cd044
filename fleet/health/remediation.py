"""Remediation: what automation and operators do to devices, and the brake on automation.

Policy, after each poll of a shard (`after_poll`):

- A device in service that is critical for a hung or failed driver, an uncorrectable
  memory error, a critical temperature or an imminent memory leak is rebooted, then
  watched: healthy again (its driver answers and nothing is critical) puts it back in
  service; still not healthy `REMEDIATION_REBOOT_TIMEOUT_S` after the reboot, or asking for
  more than `REMEDIATION_MAX_REBOOTS` reboots within `REMEDIATION_REBOOT_WINDOW_S`, sends it
  to repair. A device with no recent data is unknown, never critical, so never rebooted.
- The brake: automation keeps at most `REMEDIATION_MAX_ACTIVE` devices rebooting fleet-wide
  and `REMEDIATION_MAX_PER_HOST` per host, and pauses itself when
  `REMEDIATION_PAUSE_CRITICAL` devices in service are critical at once, until an operator
  resumes it. `REMEDIATION_DRY_RUN` records what it would do instead of doing it. The
  brake never holds back an operator.

Exactly once: a device is claimed by a conditional update of its state (the row count says
who won), in the same transaction as the action row, under a lock on the automation row so
that the limits are counted and claimed atomically. The action row is written before the
device is touched: a worker killed between the two leaves a pending action that the next
poll's follow-up issues, and a reboot that never ends becomes a repair.
"""

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

from celery import current_app
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from fleet.agent import queues
from fleet.choices import ActionKind, ActionStatus, DeviceState, Health
from fleet.durations import human_duration
from fleet.health import assessing, control
from fleet.models import Action, Automation, Device

log = logging.getLogger(__name__)

# Sent by name, so this module need not import fleet.tasks (which imports it).
ISSUE_ACTION_TASK = "fleet.tasks.issue_action"

# Critical findings of these rules call for a reboot.
REBOOT_RULES = ("driver", "ecc", "temperature", "memory_leak")


class Conflict(Exception):
    """The device is already being acted on (HTTP 409)."""


def reboot_findings(snapshot: dict) -> list[dict]:
    """The critical findings of a snapshot that a reboot may cure."""
    return [
        f
        for f in snapshot.get("health_findings") or []
        if f["level"] == Health.CRITICAL and f["rule"] in REBOOT_RULES and f.get("values", {}).get("driver_status") != "rebooting"
    ]


def after_poll(polled: dict[int, dict]) -> None:
    """Follows up devices being rebooted or in maintenance, then remediates what needs it."""
    if not polled:
        return
    follow_up(polled)
    candidates = {device_id: found for device_id, s in polled.items() if (found := reboot_findings(s))}
    if not candidates:
        return
    if check_brake():
        return
    for device_id, findings in candidates.items():
        remediate(device_id, findings, sampled_at=polled[device_id].get("sample_ts"))


# --- the brake --------------------------------------------------------------------------


def check_brake() -> bool:
    """True when automation is paused; pauses it when too many devices are critical at once."""
    critical = assessing.critical_count()
    if critical >= settings.REMEDIATION_PAUSE_CRITICAL:
        reason = (
            f"{critical} devices critical at once (limit {settings.REMEDIATION_PAUSE_CRITICAL}): "
            "automation paused until an operator resumes it"
        )
        set_paused(True, reason=reason)
        return True
    return Automation.current().paused


def set_paused(paused: bool, *, reason: str, user=None) -> bool:
    """Pauses or resumes automation; records it once (returns whether it changed)."""
    Automation.current()
    now = timezone.now()
    with transaction.atomic():
        changed = Automation.objects.filter(id=1, paused=not paused).update(paused=paused, reason=reason, changed_at=now)
        if changed:
            Action.objects.create(
                kind=ActionKind.PAUSE if paused else ActionKind.RESUME,
                status=ActionStatus.SUCCEEDED,
                user=user,
                reason=reason[:500],
                finished_at=now,
            )
    if changed:
        log.warning("automation %s: %s", "paused" if paused else "resumed", reason)
    return bool(changed)


# --- automated remediation --------------------------------------------------------------


@dataclass(frozen=True)
class Decision:
    kind: str  # "reboot", "repair", "hold", "dry_run", "skip"
    reason: str


def remediate(device_id: int, findings: list[dict], sampled_at: float | None = None) -> Action | None:
    """Claims the device and acts on it, within the brake; returns the action taken.

    A snapshot taken before the device last changed state says nothing about it now (a slow
    poll that read a hung device before another worker saw it back from its reboot): such a
    device is not claimed."""
    rule = findings[0]["rule"]
    why = "; ".join(f["reason"] for f in findings)
    with transaction.atomic():
        automation = Automation.objects.select_for_update().get_or_create(id=1)[0]
        if automation.paused:
            return None
        device = Device.objects.filter(id=device_id, state=DeviceState.IN_SERVICE).first()
        if device is None:
            return None  # being acted on, drained, in repair or in maintenance
        if sampled_at is not None and device.state_changed_at and device.state_changed_at.timestamp() >= sampled_at:
            return None  # the snapshot predates the device's return to service
        decision = decide(device)
        if decision.kind in {"hold", "skip"}:
            log.info("device %s not remediated: %s", device.serial, decision.reason)
            return None
        if decision.kind == "dry_run":
            return _record_dry_run(device, rule, why)
        if decision.kind == "repair":
            return _claim(device, DeviceState.REPAIR, ActionKind.REPAIR, rule=rule, reason=f"{why}; {decision.reason}",
                          status=ActionStatus.SUCCEEDED)
        action = _claim(device, DeviceState.REBOOTING, ActionKind.REBOOT, rule=rule, reason=why,
                        unchanged_since=device.state_changed_at)
    if action is not None:
        issue(action)
    return action


def decide(device: Device) -> Decision:
    """What automation may do to a critical device in service, within the brake."""
    cannot_reboot = control.reboot_unavailable_reason(device)
    if cannot_reboot:
        return Decision("repair", cannot_reboot)
    now = timezone.now()
    window = now - timedelta(seconds=settings.REMEDIATION_REBOOT_WINDOW_S)
    reboots = Action.objects.filter(
        device=device, kind=ActionKind.REBOOT, created_at__gte=window
    ).exclude(status=ActionStatus.DRY_RUN).count()
    if reboots >= settings.REMEDIATION_MAX_REBOOTS:
        window = human_duration(settings.REMEDIATION_REBOOT_WINDOW_S)
        return Decision("repair", f"{reboots} reboots within {window}")
    if settings.REMEDIATION_DRY_RUN:
        return Decision("dry_run", "dry run")
    active = Device.objects.filter(state=DeviceState.REBOOTING)
    if active.count() >= settings.REMEDIATION_MAX_ACTIVE:
        return Decision("hold", f"{settings.REMEDIATION_MAX_ACTIVE} devices already in remediation fleet-wide")
    if active.filter(host_id=device.host_id).count() >= settings.REMEDIATION_MAX_PER_HOST:
        return Decision("hold", f"{settings.REMEDIATION_MAX_PER_HOST} devices already in remediation on its host")
    return Decision("reboot", "")


def _record_dry_run(device: Device, rule: str, why: str) -> Action | None:
    """One dry-run record per device per reboot window: what automation would have done."""
    since = timezone.now() - timedelta(seconds=settings.REMEDIATION_REBOOT_WINDOW_S)
    if Action.objects.filter(device=device, status=ActionStatus.DRY_RUN, created_at__gte=since).exists():
        return None
    return Action.objects.create(
        device=device, kind=ActionKind.REBOOT, status=ActionStatus.DRY_RUN, rule=rule,
        reason=why[:500], outcome="dry run: would reboot", finished_at=timezone.now(),
    )


def _claim(device: Device, state: str, kind: str, *, rule: str = "", reason: str = "", user=None,
           status: str = ActionStatus.PENDING, allowed=(DeviceState.IN_SERVICE,), until=None,
           unchanged_since: datetime | None = None) -> Action | None:
    """Moves the device to ``state`` only if it is still in one of ``allowed`` (and, with
    ``unchanged_since``, has not changed state since), and records the action in the same
    transaction. None when another worker or person got there first."""
    now = timezone.now()
    with transaction.atomic():
        claim = Device.objects.filter(id=device.id, state__in=list(allowed))
        if unchanged_since is not None:
            claim = claim.filter(state_changed_at=unchanged_since)
        changed = claim.update(
            state=state, state_changed_at=now, maintenance_until=until
        )
        if not changed:
            return None
        finished = now if status == ActionStatus.SUCCEEDED else None
        return Action.objects.create(
            device=device, kind=kind, status=status, rule=rule, user=user, reason=reason[:500],
            until=until, finished_at=finished, outcome="done" if finished else "",
        )


def issue(action: Action) -> None:
    """Tells the device (the reboot), then marks the action issued. Safe to repeat."""
    device = Device.objects.select_related("host").get(id=action.device_id)
    try:
        control.reboot_device(device)
    except Exception as exc:  # a driver that cannot reboot: the device goes to repair
        log.exception("reboot of %s failed", device.serial)
        _finish(action, ActionStatus.FAILED, f"reboot failed: {exc}", DeviceState.REPAIR)
        return
    assessing.forget_windows([device.id])
    Action.objects.filter(id=action.id, status=ActionStatus.PENDING).update(
        status=ActionStatus.ISSUED, issued_at=timezone.now()
    )
    log.warning("rebooted %s (%s)", device.serial, action.reason)


def _finish(action: Action, status: str, outcome: str, state: str) -> bool:
    now = timezone.now()
    with transaction.atomic():
        done = Action.objects.filter(id=action.id, status__in=[ActionStatus.PENDING, ActionStatus.ISSUED]).update(
            status=status, outcome=outcome[:500], finished_at=now
        )
        if done:
            Device.objects.filter(id=action.device_id, state=DeviceState.REBOOTING).update(state=state, state_changed_at=now)
    return bool(done)


# --- following up -----------------------------------------------------------------------


def follow_up(polled: dict[int, dict]) -> None:
    """Devices of this poll that are rebooting or in maintenance: finish what is due."""
    busy = list(
        Device.objects.filter(id__in=list(polled), state__in=[DeviceState.REBOOTING, DeviceState.MAINTENANCE])
    )
    if not busy:
        return
    now = timezone.now()
    for device in busy:
        if device.state == DeviceState.MAINTENANCE:
            if device.maintenance_until and device.maintenance_until <= now:
                _claim(device, DeviceState.IN_SERVICE, ActionKind.RETURN_TO_SERVICE, reason="maintenance ended",
                       status=ActionStatus.SUCCEEDED, allowed=(DeviceState.MAINTENANCE,))
            continue
        action = Action.objects.filter(device=device, kind=ActionKind.REBOOT).order_by("-created_at", "-id").first()
        if action is None:
            _claim(device, DeviceState.IN_SERVICE, ActionKind.RETURN_TO_SERVICE, reason="rebooting without a reboot on record",
                   status=ActionStatus.SUCCEEDED, allowed=(DeviceState.REBOOTING,))
            continue
        _follow_reboot(action, polled[device.id], now)


def _follow_reboot(action: Action, snapshot: dict, now: datetime) -> None:
    grace = timedelta(seconds=max(10.0, 3 * settings.POLL_INTERVAL))
    if action.status == ActionStatus.PENDING:
        if now - action.created_at > grace:
            log.warning("completing reboot %d left pending by a lost worker", action.id)
            issue(action)
        return
    if action.status != ActionStatus.ISSUED:
        return  # finished already: the device was put back by someone else
    waited = (now - action.issued_at).total_seconds()
    sampled = snapshot.get("sample_ts") or 0.0
    back = (
        sampled > action.issued_at.timestamp()
        and snapshot.get("driver_status") == "ok"
        and snapshot.get("health") in {Health.HEALTHY, Health.WARNING}
    )
    if back:
        _finish(action, ActionStatus.SUCCEEDED, f"healthy again {human_duration(waited)} after the reboot", DeviceState.IN_SERVICE)
    elif waited > settings.REMEDIATION_REBOOT_TIMEOUT_S:
        reasons = ", ".join(snapshot.get("health_reasons") or []) or snapshot.get("health", "unknown")
        if _finish(action, ActionStatus.FAILED, f"not healthy {human_duration(waited)} after the reboot ({reasons})", DeviceState.REPAIR):
            Action.objects.create(
                device_id=action.device_id, kind=ActionKind.REPAIR, status=ActionStatus.SUCCEEDED, rule=action.rule,
                reason=f"not healthy after a reboot ({reasons})"[:500], outcome="done", finished_at=now,
            )


# --- operator actions -------------------------------------------------------------------

OPERATOR_TARGETS = {
    ActionKind.DRAIN: DeviceState.DRAINED,
    ActionKind.REPAIR: DeviceState.REPAIR,
    ActionKind.RETURN_TO_SERVICE: DeviceState.IN_SERVICE,
    ActionKind.MAINTENANCE: DeviceState.MAINTENANCE,
}
NOT_REBOOTING = tuple(s for s in DeviceState.values if s != DeviceState.REBOOTING)


def request_action(device: Device, kind: str, *, user, reason: str = "", until: datetime | None = None) -> Action:
    """An operator's action. Raises Conflict when the device is being rebooted; a reboot is
    issued by a task once the action row is committed."""
    if kind == ActionKind.REBOOT:
        cannot_reboot = control.reboot_unavailable_reason(device)
        if cannot_reboot:
            raise Conflict(cannot_reboot)
        action = _claim(device, DeviceState.REBOOTING, kind, user=user, reason=reason, allowed=NOT_REBOOTING)
        if action is None:
            raise Conflict(f"{device.serial} is being rebooted; wait until it is back")
        # The reboot runs where the device is: an agent's host on that agent's queue.
        queue = queues.host_queue(device.host)
        transaction.on_commit(
            lambda: current_app.send_task(ISSUE_ACTION_TASK, (action.id,), queue=queue, ignore_result=True)
        )
        return action
    action = _claim(
        device, OPERATOR_TARGETS[kind], kind, user=user, reason=reason, status=ActionStatus.SUCCEEDED,
        allowed=NOT_REBOOTING, until=until if kind == ActionKind.MAINTENANCE else None,
    )
    if action is None:
        raise Conflict(f"{device.serial} is being rebooted; wait until it is back")
    return action


def issue_pending(action_id: int) -> None:
    """The task behind an operator's reboot: exits quietly when the action is gone or done."""
    action = Action.objects.filter(id=action_id, status=ActionStatus.PENDING).first()
    if action is not None and action.device_id is not None:
        issue(action)
