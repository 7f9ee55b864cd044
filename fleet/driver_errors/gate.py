"""The validation gate: a device under repair goes back to service only after its check
passes, and the check's result is kept on the action.

The check of an emulated device is its short diagnostic (it fails while a fault remains);
on a host with an agent, the command of its spec's ``diagnose`` statement (e.g. NVIDIA's
``dcgmi diag -r 1``), run in the background by the agent, exit status 0 passing; a spec
without one, or a machine without the command, falls back to the device's health (driver
answering, nothing critical), said so on the action. A check that fails, or a device not
back within LADDER_CHECK_TIMEOUT_S, climbs the ladder.
"""

from __future__ import annotations

import logging
import shlex
import subprocess
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from fleet.asimov.loader import diagnostic_argv
from fleet.choices import ActionStatus, DeviceState, Health
from fleet.driver_errors.ladder import RULE, climb, perform_or_climb
from fleet.hosts.emulated_fleet import host_monitor
from fleet.models import Action, Device
from fleet.reading.durations import human_duration

log = logging.getLogger(__name__)

__all__ = ["follow_up", "run_check"]

_running: dict[int, subprocess.Popen] = {}  # action id -> its diagnostic, in this agent


def follow_up(polled: dict[int, dict]) -> None:
    """Devices of this poll under repair: re-issue what a lost worker left, check those back."""
    devices = Device.objects.filter(id__in=list(polled), state=DeviceState.UNDER_REPAIR).select_related("host")
    now = timezone.now()
    for device in devices:
        action = (Action.objects.filter(device=device, rule=RULE, status__in=[ActionStatus.PENDING, ActionStatus.ISSUED])
                  .order_by("-created_at", "-id").first())
        if action is None:
            continue
        if action.status == ActionStatus.PENDING:
            if now - action.created_at > timedelta(seconds=max(10.0, 3 * settings.POLL_INTERVAL)):
                perform_or_climb(action)  # a worker lost between the claim and the call
            continue
        _follow(device, action, polled[device.id], now)


def _follow(device: Device, action: Action, snapshot: dict, now) -> None:
    waited = (now - action.issued_at).total_seconds()
    back = (snapshot.get("sample_ts") or 0.0) > action.issued_at.timestamp() and snapshot.get("driver_status") == "ok"
    if back:
        verdict = run_check(device, action, snapshot)
        if verdict is None:
            return  # the check is still running
        passed, detail = verdict
        if passed:
            _passed(device, action, detail, waited)
        else:
            _record(action, ActionStatus.FAILED, False, detail, f"check failed after {human_duration(waited)}")
            climb(action, detail)
    elif waited > settings.LADDER_CHECK_TIMEOUT_S:
        detail = f"not answering {human_duration(waited)} after {action.get_kind_display().lower()}"
        _record(action, ActionStatus.FAILED, False, detail, detail)
        climb(action, detail)


def run_check(device: Device, action: Action, snapshot: dict) -> tuple[bool, str] | None:
    """(passed, what it found), or None while a background diagnostic still runs."""
    if not device.host.has_agent:
        return host_monitor(device.host.name).diagnose(device.serial)
    from fleet.agent.discovery import agent_host

    # the spec's diagnose arguments, only from a spec folder's spec (refused says why not)
    argv, refused = diagnostic_argv(agent_host().monitor(device.serial), settings.ASIMOV_SPEC_DIRS)
    command = shlex.join(argv)
    if argv:
        proc = _running.get(action.id)
        if proc is None:
            try:
                _running[action.id] = subprocess.Popen(  # noqa: S603 - the spec's own arguments, no shell
                    list(argv), shell=False, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                return None
            except FileNotFoundError:
                pass  # not installed here: fall back to health
        else:
            if proc.poll() is None:
                return None
            del _running[action.id]
            out = (proc.stdout.read() if proc.stdout else "").strip().splitlines()
            return proc.returncode == 0, f"{command}: exit {proc.returncode}; {out[-1] if out else ''}"[:500]
    healthy = snapshot.get("health") in (Health.HEALTHY, Health.WARNING)
    what = f"no diagnostic{' (' + command + ' not installed)' if command else ''}{'; ' + refused if refused else ''}"
    what += f"; health {snapshot.get('health')}"
    return healthy, what


def _record(action: Action, status: str, passed: bool | None, detail: str, outcome: str) -> bool:
    """The check's verdict, after what the rung itself did (a host command's result)."""
    outcome = f"{action.outcome}; {outcome}" if action.outcome else outcome
    return bool(Action.objects.filter(id=action.id, status=ActionStatus.ISSUED).update(
        status=status, check_passed=passed, check_detail=detail[:500], outcome=outcome[-500:], finished_at=timezone.now()))


def _passed(device: Device, action: Action, detail: str, waited: float) -> None:
    with transaction.atomic():
        if _record(action, ActionStatus.SUCCEEDED, True, detail, f"check passed {human_duration(waited)} after the repair"):
            Device.objects.filter(id=device.id, state=DeviceState.UNDER_REPAIR).update(
                state=DeviceState.IN_SERVICE, state_changed_at=timezone.now())
    log.info("%s back in service: %s", device.serial, detail)
