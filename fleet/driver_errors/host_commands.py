"""The repair ladder's rungs on a host with an agent that Asicmon does through the host's
own commands: restarting the application (AGENT_RESTART_APP_COMMAND, e.g. a script asking
the scheduler to requeue the job) and rebooting the machine (AGENT_REBOOT_COMMAND, e.g.
``sudo systemctl reboot``). The agent runs them, each within AGENT_RUNG_TIMEOUT_S, with the
device named in its environment; exit status 0 is done. A rung whose setting is empty is
not configured on this host: the ladder climbs past it, saying so on the action."""

from __future__ import annotations

import os
import shlex
import subprocess

from django.conf import settings

__all__ = ["NotConfigured", "RungCommandFailed", "run_rung_command"]

SETTING = {"restart_application": "AGENT_RESTART_APP_COMMAND", "reboot_host": "AGENT_REBOOT_COMMAND"}


class NotConfigured(Exception):
    pass


class RungCommandFailed(Exception):
    pass


def run_rung_command(rung: str, device) -> str:
    """Runs ``rung``'s command for ``device``; what it did, for the action's outcome.
    Raises NotConfigured or RungCommandFailed (a non-zero exit, a timeout, a missing program)."""
    name = SETTING[rung]
    command = getattr(settings, name, "")
    if not command:
        raise NotConfigured(f"{rung.replace('_', ' ')} is not configured on host {device.host.name} ({name} is empty)")
    env = dict(os.environ, ASICMON_RUNG=rung, ASICMON_DEVICE_SERIAL=device.serial, ASICMON_HOST=device.host.name,
               ASICMON_WORKLOAD=device.workload or "")
    timeout = settings.AGENT_RUNG_TIMEOUT_S
    try:
        done = subprocess.run(  # noqa: S603 - the operator's own command line, from the agent's settings
            shlex.split(command), env=env, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        raise RungCommandFailed(f"{name} `{command}` still running after {timeout:g} s: stopped") from None
    except OSError as exc:
        raise RungCommandFailed(f"{name} `{command}` could not start: {exc}") from None
    out = (done.stdout + done.stderr).strip().splitlines()
    said = f"; {out[-1]}" if out else ""
    if done.returncode != 0:
        raise RungCommandFailed(f"{name} `{command}`: exit {done.returncode}{said}")
    return f"{name} `{command}`: exit 0{said}"
