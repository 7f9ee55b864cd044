"""Doing a rung of the repair ladder to a device: tell its workload to restart, reset it
(its spec's reboot action), reboot its host. Every call that changes a device goes through
`fleet.health.control` or the emulator's host here.

An emulated device does each rung in the emulator (its workload restarts; a reset keeps the
faults only a host reboot cures; a host reboot restarts every device of the host). On a
host with an agent, a reset is the spec's reboot action; restarting the application and
rebooting the machine are the host's own commands (AGENT_RESTART_APP_COMMAND,
AGENT_REBOOT_COMMAND, see `host_commands`), run by the agent with their result on the
action (the command line, secrets masked, on `Action.command` for operators); where one is
not configured, or the spec declares no reset, the rung is skipped and the ladder climbs past
it. The validation check still decides.
"""

from __future__ import annotations

import logging

from django.utils import timezone

from fleet.choices import ActionStatus, Rung
from fleet.driver_errors.host_commands import NotConfigured, command_for, masked, run_rung_command
from fleet.health import assessing, control
from fleet.hosts.emulated_fleet import host_monitor
from fleet.hosts.exporter_fleet import read_only_reason
from fleet.models import Action, Device

log = logging.getLogger(__name__)

__all__ = ["perform"]


def perform(action: Action) -> tuple[str, bool] | None:
    """Does the action's rung and marks it issued; returns why it could not be done and
    whether it was skipped (it cannot run on this host: no attempt) or failed (the caller
    climbs either way), None when done."""
    if action.status != ActionStatus.PENDING:
        return None  # pulled, or with a person: nothing to do to the device
    device = Device.objects.select_related("host").get(id=action.device_id)
    if device.host.has_agent and action.rung in (Rung.RESTART_APPLICATION, Rung.REBOOT_HOST):
        Action.objects.filter(id=action.id).update(command=masked(command_for(action.rung))[:500])
    try:
        outcome = _do(action.rung, device)
    except (NotConfigured, control.NotSupported) as exc:
        log.info("%s of %s skipped: %s", action.rung, device.serial, exc)
        return str(exc), True
    except Exception as exc:  # a driver that refuses, a command that fails
        log.warning("%s of %s failed: %s", action.rung, device.serial, exc)
        return f"{action.rung} failed: {exc}", False
    assessing.forget_windows([device.id])
    Action.objects.filter(id=action.id, status=ActionStatus.PENDING).update(
        status=ActionStatus.ISSUED, issued_at=timezone.now(), outcome=outcome[:500])
    return None


def _do(rung: str, device: Device) -> str:
    if reason := read_only_reason(device.host.name):
        raise control.NotSupported(reason)
    emulated = not device.host.has_agent
    if rung == Rung.RESTART_APPLICATION:
        if emulated:
            cleared = host_monitor(device.host.name).restart_workload(device.serial)
            return f"workload restarted ({', '.join(cleared) or 'no fault cleared'})"
        return run_rung_command(rung, device)
    if rung == Rung.RESET_DEVICE:
        control.reboot_device(device)
        return "device reset"
    if rung == Rung.REBOOT_HOST:
        if emulated:
            host_monitor(device.host.name).reboot_host()
            return f"host {device.host.name} rebooted"
        return run_rung_command(rung, device)
    raise ValueError(f"no such rung {rung!r}")
