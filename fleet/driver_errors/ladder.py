"""The repair ladder: what automation does about a device's driver errors.

Each stored error the catalogue says to act on is an incident of its *cause* (memory, bus,
gsp, nvlink, application, ...). The ladder's rungs, least disruptive first:

    restart_application -> reset_device -> reboot_host -> inspect_hardware (out of service)

An incident starts at the rung its catalogue entry names (an Xid 79 at reboot_host, a 94 at
restart_application). When the same cause comes back after a repair, or the repair's check
fails, the next rung. The *attempt budget*: at most LADDER_MAX_ATTEMPTS repairs per device
(by serial, across hosts) and cause within LADDER_WINDOW_S, the first one counting; then
the device goes out of service for inspection. Ignore-class events are recorded and never
acted on.

Limits, checked and claimed atomically under the automation row's lock, like
`fleet.health.remediation`: the *blast radius* (at most LADDER_MAX_PER_WORKLOAD devices of one
workload under repair at once; the others wait, their incidents pending) and the fleet-wide
*breaker* (more than LADDER_BREAKER_SHARE of the fleet taken under repair within
LADDER_BREAKER_WINDOW_S pauses automation until an operator resumes it).

The validation gate (`fleet.driver_errors.gate`) decides when a device under repair goes back.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from fleet.choices import ActionKind, ActionStatus, DeviceState, Rung
from fleet.driver_errors import rungs
from fleet.health import remediation
from fleet.models import Action, Automation, Device, DriverError
from fleet.reading.durations import human_duration

log = logging.getLogger(__name__)

__all__ = ["LADDER", "Step", "climb", "decide", "handle_incidents", "perform_or_climb"]

LADDER = (Rung.RESTART_APPLICATION, Rung.RESET_DEVICE, Rung.REBOOT_HOST, Rung.INSPECT_HARDWARE)
KIND_OF = {
    Rung.RESTART_APPLICATION: ActionKind.RESTART_APPLICATION,
    Rung.RESET_DEVICE: ActionKind.REBOOT,
    Rung.REBOOT_HOST: ActionKind.REBOOT_HOST,
    Rung.INSPECT_HARDWARE: ActionKind.REPAIR,
}
RULE = "driver_error"


@dataclass(frozen=True)
class Step:
    rung: str
    reason: str


def pending(device_ids: list[int]):
    """Stored errors not yet handled, and handled ones that came back after their repair,
    seen within the attempt window (older ones are history, not incidents)."""
    since = timezone.now() - timedelta(seconds=settings.LADDER_WINDOW_S)
    return DriverError.objects.filter(device_id__in=device_ids, last_seen__gte=since).filter(
        Q(handled_by__isnull=True, outcome="")
        | Q(handled_by__status=ActionStatus.SUCCEEDED, last_seen__gt=F("handled_by__finished_at"))
    ).select_related("device")


def handle_incidents(device_ids: list[int]) -> list[Action]:
    rows = list(pending(device_ids).order_by("first_seen", "id"))
    if not rows:
        return []
    ignored = [r.id for r in rows if r.action == "ignore"]
    if ignored:
        DriverError.objects.filter(id__in=ignored).update(outcome="ignored: the catalogue asks for no action")
    for_a_person = [r.id for r in rows if r.action == "inspect"]  # unknown codes, "contact support": no rung guessed
    if for_a_person:
        DriverError.objects.filter(id__in=for_a_person).update(outcome="unknown: inspect (a person reads the raw line)")
    by_device: dict[int, list[DriverError]] = {}
    for row in rows:
        if row.action not in ("ignore", "inspect"):
            by_device.setdefault(row.device_id, []).append(row)
    taken = []
    for device_id, found in by_device.items():
        action = _handle(device_id, found)
        if action is not None:
            taken.append(action)
    return taken


def _handle(device_id: int, rows: list[DriverError]) -> Action | None:
    device = Device.objects.select_related("host").get(id=device_id)
    if device.state == DeviceState.UNDER_REPAIR:
        _attach(rows, device)
        return None
    if device.state != DeviceState.IN_SERVICE:
        DriverError.objects.filter(id__in=[r.id for r in rows]).update(outcome=f"not acted on: device {device.state}")
        return None
    worst = max(rows, key=lambda r: _index(r.action))
    step = decide(device, worst.cause or "unknown", worst.action)
    action = claim(device, step, worst, rows)
    if action is not None:
        perform_or_climb(action)
    return action


def perform_or_climb(action: Action) -> None:
    why = rungs.perform(action)
    if why is not None:
        climb(action, why)


def _attach(rows: list[DriverError], device: Device) -> None:
    open_action = Action.objects.filter(device=device, rule=RULE).order_by("-created_at", "-id").first()
    DriverError.objects.filter(id__in=[r.id for r in rows]).update(
        handled_by=open_action, outcome="came during a repair already under way")


def _index(rung: str) -> int:
    return LADDER.index(rung) if rung in LADDER else 0


def attempts(serial: str, cause: str):
    """The ladder's repairs of this device (by serial, on any host) and cause in the window."""
    since = timezone.now() - timedelta(seconds=settings.LADDER_WINDOW_S)
    return Action.objects.filter(serial=serial, cause=cause, rule=RULE, created_at__gte=since,
                                 rung__in=LADDER[:3]).exclude(status=ActionStatus.DRY_RUN)


def decide(device: Device, cause: str, start: str) -> Step:
    """The rung for an incident of ``cause``: where its catalogue starts, one above the last
    repair of the same cause if it came back, out of service once the budget is spent."""
    done = attempts(device.serial, cause).order_by("-created_at", "-id")
    count = done.count()
    window = human_duration(settings.LADDER_WINDOW_S)
    if count >= settings.LADDER_MAX_ATTEMPTS:
        return Step(Rung.INSPECT_HARDWARE, f"attempt budget spent: {count} repairs of {cause} within {window}")
    rung = start if start in LADDER else Rung.RESET_DEVICE
    if count:
        last = done.first()
        rung = LADDER[max(_index(rung), _index(last.rung) + 1)]
        return Step(rung, f"{cause} came back after {last.get_kind_display().lower()} ({count} of "
                          f"{settings.LADDER_MAX_ATTEMPTS} attempts within {window})")
    return Step(rung, "first rung for this cause")


def claim(device: Device, step: Step, worst: DriverError, rows: list[DriverError]) -> Action | None:
    """Claims the device for the rung within the blast radius and the breaker, and records
    the action with the errors it answers; None when held back (the errors stay pending)."""
    reason = f"Xid {worst.code}" if worst.vendor == "nvidia" else f"{worst.vendor} {worst.code}"
    reason = f"{reason} {worst.name}: {step.reason}"
    inspect = step.rung == Rung.INSPECT_HARDWARE
    with transaction.atomic():
        automation = Automation.objects.select_for_update().get_or_create(id=1)[0]
        if automation.paused:
            return None
        held = None if inspect else _held_back(device)
        if held:
            log.info("%s not repaired now: %s", device.serial, held)
            return None
        changed = Device.objects.filter(id=device.id, state=DeviceState.IN_SERVICE).update(
            state=DeviceState.REPAIR if inspect else DeviceState.UNDER_REPAIR, state_changed_at=timezone.now())
        if not changed:
            return None
        action = Action.objects.create(
            device=device, kind=KIND_OF[step.rung], rung=step.rung, cause=worst.cause or "unknown", serial=device.serial,
            rule=RULE, reason=reason[:500],
            status=ActionStatus.SUCCEEDED if inspect else ActionStatus.PENDING,
            outcome="out of service for inspection" if inspect else "", finished_at=timezone.now() if inspect else None,
        )
        DriverError.objects.filter(id__in=[r.id for r in rows]).update(handled_by=action, outcome=step.rung)
    log.warning("%s: %s (%s)", device.serial, step.rung, reason)
    return action


def _held_back(device: Device) -> str | None:
    """Why the blast radius or the breaker holds the device back now (None: go)."""
    busy = Device.objects.filter(state=DeviceState.UNDER_REPAIR)
    if device.workload and busy.filter(workload=device.workload).count() >= settings.LADDER_MAX_PER_WORKLOAD:
        return f"{settings.LADDER_MAX_PER_WORKLOAD} devices of workload {device.workload} already under repair"
    since = timezone.now() - timedelta(seconds=settings.LADDER_BREAKER_WINDOW_S)
    recent = set(Action.objects.filter(rule=RULE, created_at__gte=since, rung__in=LADDER[:3])
                 .exclude(status=ActionStatus.DRY_RUN).values_list("device_id", flat=True))
    fleet = Device.objects.count() or 1
    # More than the share (and more than one device: one repair never trips a small fleet).
    if len(recent | {device.id}) > max(1.0, settings.LADDER_BREAKER_SHARE * fleet):
        share = f"{settings.LADDER_BREAKER_SHARE:.0%}"
        reason = (f"breaker: {len(recent) + 1} of {fleet} devices taken under repair within "
                  f"{human_duration(settings.LADDER_BREAKER_WINDOW_S)} (more than {share}); automation paused")
        transaction.on_commit(lambda: remediation.set_paused(True, reason=reason))
        return reason
    return None


def climb(action: Action, why: str) -> Action | None:
    """The next rung for the same device and cause after ``action`` did not cure it (its
    check failed, or the rung could not be done): out of service once the budget is spent."""
    Action.objects.filter(id=action.id, status__in=[ActionStatus.PENDING, ActionStatus.ISSUED]).update(
        status=ActionStatus.FAILED, outcome=why[:500], finished_at=timezone.now())
    device = Device.objects.get(id=action.device_id)
    start = LADDER[min(LADDER.index(action.rung) + 1, len(LADDER) - 1)] if action.rung in LADDER else Rung.INSPECT_HARDWARE
    step = decide(device, action.cause, start)
    inspect = step.rung == Rung.INSPECT_HARDWARE
    with transaction.atomic():
        if not Device.objects.filter(id=device.id, state=DeviceState.UNDER_REPAIR).update(
                state=DeviceState.REPAIR if inspect else DeviceState.UNDER_REPAIR, state_changed_at=timezone.now()):
            return None
        nxt = Action.objects.create(
            device=device, kind=KIND_OF[step.rung], rung=step.rung, cause=action.cause, serial=device.serial, rule=RULE,
            reason=f"{why}; {step.reason}"[:500], status=ActionStatus.SUCCEEDED if inspect else ActionStatus.PENDING,
            outcome="out of service for inspection" if inspect else "", finished_at=timezone.now() if inspect else None,
        )
    log.warning("%s: climbs to %s (%s)", device.serial, step.rung, why)
    perform_or_climb(nxt)
    return nxt
