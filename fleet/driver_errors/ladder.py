"""The repair ladder: what automation does about a device's driver errors.

Each stored error the catalogue says to act on is an incident of its *cause* (memory, bus,
gsp, nvlink, application, ...). The ladder's rungs, least disruptive first:

    restart_application -> reset_device -> reboot_host -> inspect_hardware (out of service)

An incident starts at the rung its catalogue entry names (an Xid 79 at reboot_host, a 94 at
restart_application). When the same cause comes back after a repair, or the repair's check
fails, the next rung. A rung that cannot run on the device's host (its command not
configured there, a reset its spec does not declare) is *skipped*, recorded with its reason,
and is no attempt. When no rung above can run, the incident *needs a person*: the device is
drained (capacity weight 0), not sent to inspection. The *attempt budget*: at most
LADDER_MAX_ATTEMPTS repairs tried per device (by serial, across hosts) and cause within
LADDER_WINDOW_S, the first one counting; then the device is pulled for inspection. Ignore-class
events are recorded and never acted on.

Limits, checked and claimed atomically under the automation row's lock, like
`fleet.health.remediation`: the *blast radius* (at most LADDER_MAX_PER_WORKLOAD devices of one
workload under repair at once, counting for a host reboot every device of the host; the
others wait, their incidents pending) and the fleet-wide *breaker* (at least
LADDER_BREAKER_MIN_DEVICES devices and more than LADDER_BREAKER_SHARE of the fleet taken under
repair within LADDER_BREAKER_WINDOW_S pause automation until an operator resumes it).

The validation gate (`fleet.driver_errors.gate`) decides when a device under repair goes back.
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from fleet.asicmon import ladder_rules
from fleet.choices import ActionKind, ActionStatus, DeviceState, Rung
from fleet.driver_errors import host_commands, rungs
from fleet.durations import human_duration
from fleet.health import control, remediation
from fleet.models import Action, Automation, Device, DriverError

log = logging.getLogger(__name__)

__all__ = ["LADDER", "REPAIRED", "Step", "climb", "decide", "handle_incidents", "perform_or_climb", "unavailable"]

LADDER = (Rung.RESTART_APPLICATION, Rung.RESET_DEVICE, Rung.REBOOT_HOST, Rung.INSPECT_HARDWARE)
REPAIRS = LADDER[:3]
KIND_OF = {
    Rung.RESTART_APPLICATION: ActionKind.RESTART_APPLICATION,
    Rung.RESET_DEVICE: ActionKind.REBOOT,
    Rung.REBOOT_HOST: ActionKind.REBOOT_HOST,
    Rung.INSPECT_HARDWARE: ActionKind.REPAIR,
    Rung.NEEDS_PERSON: ActionKind.DRAIN,
}
# Where each end of the ladder leaves the device, with the action's status.
ENDS = {
    Rung.INSPECT_HARDWARE: (DeviceState.REPAIR, ActionStatus.PULLED, "pulled for inspection"),
    Rung.NEEDS_PERSON: (DeviceState.DRAINED, ActionStatus.NEEDS_PERSON, "drained: needs a person"),
}
REPAIRED = (ActionStatus.SUCCEEDED, ActionStatus.NOT_VALIDATED)  # the device went back to service
NOT_ATTEMPTS = (ActionStatus.DRY_RUN, ActionStatus.SKIPPED)
RULE = "driver_error"
COMMAND_NAME = {Rung.RESTART_APPLICATION: "restart-application", Rung.REBOOT_HOST: "reboot"}


@dataclass(frozen=True)
class Step:
    rung: str
    reason: str
    skipped: tuple[tuple[str, str], ...] = ()  # (rung, why it cannot run here), below ``rung``


def pending(device_ids: list[int]):
    """Stored errors not yet handled, and handled ones that came back after their repair,
    seen within the attempt window (older ones are history, not incidents)."""
    since = timezone.now() - timedelta(seconds=settings.LADDER_WINDOW_S)
    return DriverError.objects.filter(device_id__in=device_ids, last_seen__gte=since).filter(
        Q(handled_by__isnull=True, outcome="")
        | Q(handled_by__status__in=REPAIRED, last_seen__gt=F("handled_by__finished_at"))
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
    trouble = rungs.perform(action)
    if trouble is not None:
        why, skipped = trouble
        climb(action, why, skipped=skipped)


def _attach(rows: list[DriverError], device: Device) -> None:
    open_action = Action.objects.filter(device=device, rule=RULE).order_by("-created_at", "-id").first()
    DriverError.objects.filter(id__in=[r.id for r in rows]).update(
        handled_by=open_action, outcome="came during a repair already under way")


def _index(rung: str) -> int:
    return LADDER.index(rung) if rung in LADDER else 0


def attempts(serial: str, cause: str):
    """The ladder's repairs of this device (by serial, on any host) and cause in the window
    that were tried (a skipped rung is no attempt)."""
    since = timezone.now() - timedelta(seconds=settings.LADDER_WINDOW_S)
    return Action.objects.filter(serial=serial, cause=cause, rule=RULE, created_at__gte=since,
                                 rung__in=REPAIRS).exclude(status__in=NOT_ATTEMPTS)


def unavailable(rung: str, device: Device) -> str | None:
    """Why ``rung`` cannot run on the device's host (None: it can)."""
    if rung == Rung.RESET_DEVICE:
        return control.reboot_unavailable_reason(device)
    if rung in COMMAND_NAME and device.host.has_agent and not host_commands.command_for(rung):
        setting = host_commands.SETTING[rung]
        return f"no {COMMAND_NAME[rung]} command configured on {device.host.name} ({setting} is empty)"
    return None


def decide(device: Device, cause: str, start: str, *, climbing: bool = False) -> Step:
    """The rung for an incident of ``cause``: where its catalogue starts, one above the last
    repair of the same cause if it came back, the first of them that can run on the host;
    pulled for inspection once the budget is spent, a person when no rung above can run."""
    done = attempts(device.serial, cause).order_by("-created_at", "-id")
    count = done.count()
    window = human_duration(settings.LADDER_WINDOW_S)
    last = done.first() if count else None
    rung, spent, skipped = ladder_rules.next_rung(start, count, last.rung if last else None,
                                                  settings.LADDER_MAX_ATTEMPTS, lambda r: unavailable(r, device))
    if spent:
        return Step(Rung.INSPECT_HARDWARE, f"attempt budget spent: {count} repairs of {cause} tried within {window}")
    reason = "first rung for this cause"
    if last is not None:
        what = "not cured by" if climbing else "came back after"
        reason = (f"{cause} {what} {last.get_kind_display().lower()} ({count} of "
                  f"{settings.LADDER_MAX_ATTEMPTS} attempts within {window})")
    if rung == Rung.NEEDS_PERSON:
        return Step(rung, f"needs a person: {skipped[-1][1]}", skipped)
    return Step(rung, reason, skipped)


def _take(device: Device, step: Step, cause: str, reason: str, from_state: str) -> Action | None:
    """Moves the device from ``from_state`` to where ``step`` leaves it and records the
    skipped rungs and the step's action (inside the caller's transaction); None when the
    device was not in ``from_state`` any more."""
    now = timezone.now()
    state, status, outcome = ENDS.get(step.rung, (DeviceState.UNDER_REPAIR, ActionStatus.PENDING, ""))
    if not Device.objects.filter(id=device.id, state=from_state).update(state=state, state_changed_at=now):
        return None
    for rung, why in step.skipped:
        Action.objects.create(device=device, kind=KIND_OF[rung], rung=rung, cause=cause, serial=device.serial, rule=RULE,
                              reason=f"skipped: {why}"[:500], status=ActionStatus.SKIPPED, outcome=why[:500],
                              finished_at=now)
    ended = step.rung in ENDS
    return Action.objects.create(
        device=device, kind=KIND_OF[step.rung], rung=step.rung, cause=cause, serial=device.serial, rule=RULE,
        reason=reason[:500], status=status, outcome=outcome, finished_at=now if ended else None,
    )


def claim(device: Device, step: Step, worst: DriverError, rows: list[DriverError]) -> Action | None:
    """Claims the device for the rung within the blast radius and the breaker, and records
    the action with the errors it answers; None when held back (the errors stay pending)."""
    reason = f"Xid {worst.code}" if worst.vendor == "nvidia" else f"{worst.vendor} {worst.code}"
    reason = f"{reason} {worst.name}: {step.reason}"
    with transaction.atomic():
        automation = Automation.objects.select_for_update().get_or_create(id=1)[0]
        if automation.paused:
            return None
        held = None if step.rung in ENDS else _held_back(device, step.rung)
        if held:
            log.info("%s not repaired now: %s", device.serial, held)
            return None
        if settings.REMEDIATION_DRY_RUN:  # what it would do, recorded; the device untouched
            _dry_run(device, step, worst, reason, rows)
            return None
        action = _take(device, step, worst.cause or "unknown", reason, DeviceState.IN_SERVICE)
        if action is None:
            return None
        DriverError.objects.filter(id__in=[r.id for r in rows]).update(handled_by=action, outcome=step.rung)
    log.warning("%s: %s (%s)", device.serial, step.rung, reason)
    return action


def _dry_run(device: Device, step: Step, worst: DriverError, reason: str, rows: list[DriverError]) -> None:
    now = timezone.now()
    action = Action.objects.create(
        device=device, kind=KIND_OF[step.rung], rung=step.rung, cause=worst.cause or "unknown", serial=device.serial,
        rule=RULE, reason=reason[:500], status=ActionStatus.DRY_RUN, outcome=f"dry run: would {step.rung.replace('_', ' ')}",
        finished_at=now,
    )
    DriverError.objects.filter(id__in=[r.id for r in rows]).update(handled_by=action, outcome=f"dry run: {step.rung}")
    log.warning("%s: would %s (REMEDIATION_DRY_RUN) (%s)", device.serial, step.rung, reason)


def taken_by(device: Device, rung: str) -> list[Device]:
    """The devices a rung takes out of service: the device, or for a host reboot every
    device of its host."""
    if rung == Rung.REBOOT_HOST:
        return list(Device.objects.filter(host_id=device.host_id))
    return [device]


def _held_back(device: Device, rung: str) -> str | None:
    """Why the blast radius or the breaker holds the device back now (None: go)."""
    taken = taken_by(device, rung)
    others = Device.objects.filter(state=DeviceState.UNDER_REPAIR).exclude(id__in=[d.id for d in taken])
    limit = settings.LADDER_MAX_PER_WORKLOAD
    workloads = [d.workload for d in taken]
    under_repair = Counter(others.filter(workload__in=[w for w in workloads if w]).values_list("workload", flat=True))
    held = ladder_rules.blast_radius_holds(workloads, under_repair, limit)
    if held:
        workload, busy, n = held
        what = f"{rung.replace('_', ' ')} of {device.host.name} takes {n}" if rung == Rung.REBOOT_HOST else "1 more"
        return f"{busy} devices of workload {workload} already under repair, {what} (at most {limit})"
    return _breaker(device)


def _breaker(device: Device) -> str | None:
    since = timezone.now() - timedelta(seconds=settings.LADDER_BREAKER_WINDOW_S)
    recent = dict(Action.objects.filter(rule=RULE, created_at__gte=since, rung__in=REPAIRS)
                  .exclude(status__in=NOT_ATTEMPTS).values_list("device_id", "serial"))
    recent[device.id] = device.serial
    fleet = Device.objects.count() or 1
    n = len(recent)
    if ladder_rules.breaker_trips(n, fleet, settings.LADDER_BREAKER_MIN_DEVICES, settings.LADDER_BREAKER_SHARE):
        share = f"{settings.LADDER_BREAKER_SHARE:.0%}"
        serials = sorted(recent.values())
        named = ", ".join(serials[:8]) + (f" and {len(serials) - 8} more" if len(serials) > 8 else "")
        reason = (f"breaker: {n} of {fleet} devices taken under repair within "
                  f"{human_duration(settings.LADDER_BREAKER_WINDOW_S)} (more than {share}, at least "
                  f"{settings.LADDER_BREAKER_MIN_DEVICES}): {named}; automation paused")
        transaction.on_commit(lambda: remediation.set_paused(True, reason=reason[:500]))
        return reason
    return None


def climb(action: Action, why: str, *, skipped: bool = False) -> Action | None:
    """The next rung for the same device and cause after ``action`` did not cure it (its
    check failed, or the rung could not be done, or, ``skipped``, cannot run here): pulled
    once the budget is spent, a person when no rung above can run. A host reboot the blast
    radius holds back waits, pending, for its turn."""
    Action.objects.filter(id=action.id, status__in=[ActionStatus.PENDING, ActionStatus.ISSUED]).update(
        status=ActionStatus.SKIPPED if skipped else ActionStatus.FAILED, outcome=why[:500], finished_at=timezone.now())
    device = Device.objects.select_related("host").get(id=action.device_id)
    start = LADDER[min(LADDER.index(action.rung) + 1, len(LADDER) - 1)] if action.rung in LADDER else Rung.INSPECT_HARDWARE
    step = decide(device, action.cause, start, climbing=True)
    with transaction.atomic():
        paused = Automation.objects.select_for_update().get_or_create(id=1)[0].paused
        held = _held_back(device, step.rung) if step.rung == Rung.REBOOT_HOST else None
        if paused and step.rung not in ENDS:  # nothing runs while paused: the rung waits for the resume
            held = "automation is paused"
        nxt = _take(device, step, action.cause, f"{why}; {step.reason}", DeviceState.UNDER_REPAIR)
        if nxt is None:
            return None
        if held:
            Action.objects.filter(id=nxt.id).update(outcome=f"waiting: {held}"[:500])
    log.warning("%s: climbs to %s (%s)", device.serial, step.rung, why)
    if not held:
        perform_or_climb(nxt)
    return nxt


def release_waiting(action: Action) -> bool:
    """Performs a pending host reboot the blast radius held back once it may go; True when
    it went (or was not held)."""
    device = Device.objects.select_related("host").get(id=action.device_id)
    with transaction.atomic():
        if Automation.objects.select_for_update().get_or_create(id=1)[0].paused:
            Action.objects.filter(id=action.id).update(outcome="waiting: automation is paused")
            return False
        if action.rung != Rung.REBOOT_HOST:
            return True
        held = _held_back(device, action.rung)
        if held:
            Action.objects.filter(id=action.id).update(outcome=f"waiting: {held}"[:500])
            return False
    return True
