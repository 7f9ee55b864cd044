"""The validation gate: a device under repair goes back to service only after its check,
and the check's result is kept on the action. Three outcomes:

- **passed**: the device's diagnostic passed; back in service, the action SUCCEEDED
  (repaired and validated);
- **failed**: the diagnostic failed, was stopped at its timeout, or the device came back
  unhealthy; the ladder climbs;
- **not validated**: there is no diagnostic for the device's type (hwmon and AMD hosts,
  NVIDIA hosts without DCGM): the device returns on its health alone, the action
  NOT_VALIDATED (repaired, not validated) with ``check_passed`` empty, never True.

The check of an emulated device is its short diagnostic (it fails while a fault remains).
On a host with an agent it is the command of its spec's ``diagnose`` statement (e.g.
NVIDIA's ``dcgmi diag -r 1``), a string split into an argument list or a list, never run
through a shell, started in the background by the agent in a minimal environment
(`host_commands.rung_env`): exit status 0 passes. Its output is read as it comes (a reader
thread) and stored on the action (``check_output``, after the command line, masked; for
operators) at each poll; it is stopped once it has
run LADDER_DIAGNOSTIC_TIMEOUT_S. One diagnostic per host at a time (DCGM refuses concurrent
ones): a Redis lock per host, held while it runs; the devices of the host wait their turn,
saying so on their action. A device not back within LADDER_CHECK_TIMEOUT_S climbs.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from fleet.asicmon import ladder_rules
from fleet.asimov.loader import diagnostic_argv
from fleet.choices import ActionStatus, DeviceState
from fleet.driver_errors import ladder
from fleet.driver_errors.host_commands import argv, masked, masked_text, rung_env
from fleet.driver_errors.ladder import RULE, climb, perform_or_climb
from fleet.durations import human_duration
from fleet.hosts.emulated_fleet import host_monitor
from fleet.models import Action, Device
from fleet.redis import get_redis, key

log = logging.getLogger(__name__)

__all__ = ["Verdict", "diagnostic_for", "follow_up", "run_check"]

Verdict = tuple[bool | None, str]  # (passed; None: not validated, what it found)

MISSING = object()  # the diagnostic's program is not installed on this host
_RELEASE = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end"


@dataclass
class Diagnostic:
    """One diagnostic this agent runs, and its output so far."""

    action_id: int
    host: str
    program: str
    proc: subprocess.Popen
    started: float = field(default_factory=time.monotonic)
    lines: list[str] = field(default_factory=list)
    stored: int = 0  # lines already on the action (the first: the command line, masked)
    reader: threading.Thread | None = None

    def read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(masked_text(line.rstrip("\n")))
        self.proc.stdout.close()


_running: dict[int, Diagnostic] = {}  # action id -> its diagnostic, in this agent


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
            if action.outcome.startswith("waiting:"):
                if ladder.release_waiting(action):  # a host reboot the blast radius held back
                    perform_or_climb(action)
            elif (now - action.created_at > timedelta(seconds=max(10.0, 3 * settings.POLL_INTERVAL))
                  and ladder.release_waiting(action)):  # not while paused: it waits for the resume
                perform_or_climb(action)  # a worker lost between the claim and the call
            continue
        _follow(device, action, polled[device.id], now)


def _follow(device: Device, action: Action, snapshot: dict, now) -> None:
    waited = (now - action.issued_at).total_seconds()
    back = (snapshot.get("sample_ts") or 0.0) > action.issued_at.timestamp() and snapshot.get("driver_status") == "ok"
    verdict = run_check(device, action, snapshot) if back else None  # None: still running, or waiting its turn
    step = ladder_rules.gate_step(back, waited, settings.LADDER_CHECK_TIMEOUT_S, verdict)
    if step == ladder_rules.GATE_RETURN:
        _returned(device, action, verdict[0], verdict[1], waited)
    elif step == ladder_rules.GATE_CLIMB and back:
        _record(action, ActionStatus.FAILED, False, verdict[1], f"check failed after {human_duration(waited)}")
        climb(action, verdict[1])
    elif step == ladder_rules.GATE_CLIMB:
        detail = f"not answering {human_duration(waited)} after {action.get_kind_display().lower()}"
        _record(action, ActionStatus.FAILED, False, detail, detail)
        climb(action, detail)


def diagnostic_for(device: Device) -> tuple[Sequence[str], str]:
    """The diagnostic's arguments from the device's spec on this agent (empty where it has
    none), and why they are refused ('' when they are not): only a spec from a spec folder
    runs a command (fleet.asimov.loader.diagnostic_argv)."""
    from fleet.agent.discovery import agent_host

    return diagnostic_argv(agent_host().monitor(device.serial), settings.ASIMOV_SPEC_DIRS)


def run_check(device: Device, action: Action, snapshot: dict) -> Verdict | None:
    """The check's verdict, or None while a diagnostic runs or waits for its host's turn."""
    if not device.host.has_agent:
        return host_monitor(device.host.name).diagnose(device.serial)
    command, refused = diagnostic_for(device)
    if command:
        running = _running.get(action.id)
        if running is not None:
            return _poll(running)
        started = _start(device, action, command)
        if started is not MISSING:
            return started if isinstance(started, tuple) else None  # a verdict, or running/waiting
        what = f"{Path(argv(command)[0]).name} not installed"
    else:
        what = refused or f"no diagnostic for {device.device_type}"
    return ladder_rules.check_on_health(snapshot.get("health"), what)


def _lock_key(host: str) -> str:
    return key("ladder", "diagnostic", host)


def _start(device: Device, action: Action, command) -> Diagnostic | Verdict | bool | object:
    """Starts the action's diagnostic when the host has none running: the Diagnostic, True
    while it waits for its host's turn, MISSING when the program is not installed here, a
    failed verdict when the command cannot be read."""
    host = device.host.name
    lock = _lock_key(host)
    ttl = int(settings.LADDER_DIAGNOSTIC_TIMEOUT_S + 60)
    r = get_redis()
    if not r.set(lock, str(action.id), nx=True, ex=ttl) and r.get(lock) != str(action.id).encode():
        holder = (r.get(lock) or b"?").decode()
        Action.objects.filter(id=action.id).update(check_detail=f"waiting: the diagnostic of action {holder} runs on {host}")
        return True
    try:
        parts = argv(command)
    except ValueError as exc:
        r.eval(_RELEASE, 1, lock, str(action.id))
        return False, f"diagnostic cannot be read: {exc}"
    try:
        proc = subprocess.Popen(  # noqa: S603 - the spec's own command, an argument list
            parts, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True,
            env=rung_env(action.rung, device), start_new_session=True)
    except FileNotFoundError:
        r.eval(_RELEASE, 1, lock, str(action.id))
        return MISSING
    running = Diagnostic(action.id, host, Path(parts[0]).name, proc, lines=[f"$ {masked(parts)}"])
    running.reader = threading.Thread(target=running.read, name=f"diagnostic-{action.id}", daemon=True)
    running.reader.start()
    _running[action.id] = running
    Action.objects.filter(id=action.id).update(check_detail=f"diagnostic {running.program} running", check_output="")
    log.info("%s: diagnostic %s started", device.serial, running.program)
    return running


def _poll(running: Diagnostic) -> Verdict | None:
    """Stores the output that came since the last poll; the verdict once it ended."""
    timeout = settings.LADDER_DIAGNOSTIC_TIMEOUT_S
    elapsed = time.monotonic() - running.started
    stopped = False
    if running.proc.poll() is None:
        if elapsed <= timeout:
            _store_output(running)
            return None
        _stop(running.proc)
        stopped = True
    if running.reader is not None:
        running.reader.join(timeout=5.0)
    _store_output(running)
    del _running[running.action_id]
    get_redis().eval(_RELEASE, 1, _lock_key(running.host), str(running.action_id))
    if stopped:
        return False, f"diagnostic {running.program} still running after {human_duration(timeout)}: stopped"
    last = next((line for line in reversed(running.lines[1:]) if line.strip()), "")
    code = running.proc.returncode
    return code == 0, f"diagnostic {running.program} {'passed' if code == 0 else 'failed'}: exit {code}; {last}"[:500]


def _stop(proc: subprocess.Popen) -> None:
    """Ends the diagnostic and whatever it started (its own session)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)


def _store_output(running: Diagnostic) -> None:
    if len(running.lines) == running.stored:
        return
    running.stored = len(running.lines)
    text = "\n".join(running.lines)[-Action.CHECK_OUTPUT_MAX:]
    Action.objects.filter(id=running.action_id).update(check_output=text)


def _record(action: Action, status: str, passed: bool | None, detail: str, outcome: str) -> bool:
    """The check's verdict, after what the rung itself did (a host command's result)."""
    outcome = f"{action.outcome}; {outcome}" if action.outcome else outcome
    return bool(Action.objects.filter(id=action.id, status=ActionStatus.ISSUED).update(
        status=status, check_passed=passed, check_detail=detail[:500], outcome=outcome[-500:], finished_at=timezone.now()))


def _returned(device: Device, action: Action, passed: bool | None, detail: str, waited: float) -> None:
    """Back in service: repaired and validated (passed) or repaired, not validated (None)."""
    if passed:
        status, said = ActionStatus.SUCCEEDED, f"check passed {human_duration(waited)} after the repair"
    else:
        status, said = ActionStatus.NOT_VALIDATED, f"back {human_duration(waited)} after the repair, not validated"
    with transaction.atomic():
        if _record(action, status, passed, detail, said):
            Device.objects.filter(id=device.id, state=DeviceState.UNDER_REPAIR).update(
                state=DeviceState.IN_SERVICE, state_changed_at=timezone.now())
    log.info("%s back in service: %s", device.serial, detail)
