"""The repair ladder's rungs on a host with an agent that Asicmon does through the host's
own commands: restarting the application (AGENT_RESTART_APP_COMMAND, e.g. a script asking
the scheduler to requeue the job) and rebooting the machine (AGENT_REBOOT_COMMAND, e.g.
``sudo systemctl reboot``). The agent runs them as argument lists (no shell), each within
AGENT_RUNG_TIMEOUT_S, in a minimal environment: PATH, LANG and the device's ASICMON_*
variables, never the agent's own (its database URL, secret key, tokens). Exit status 0 is
done. A rung whose setting is empty is not configured on this host: the ladder skips it.

What is stored of a command line (`masked`) has its secrets masked: the values of flags
named like a token, password, secret or key, ``Authorization:`` headers and the
credentials in URLs.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from collections.abc import Sequence

from django.conf import settings

__all__ = ["NotConfigured", "RungCommandFailed", "argv", "command_for", "masked", "masked_text", "rung_env", "run_rung_command"]

SETTING = {"restart_application": "AGENT_RESTART_APP_COMMAND", "reboot_host": "AGENT_REBOOT_COMMAND"}
KEPT_ENV = ("PATH", "LANG")
HIDDEN = "***"

_SECRET_NAME = r"[\w.-]*(?:token|pass(?:w(?:or)?d|phrase)?|pwd|secret|api[_-]?key|key|credential|auth)[\w.-]*"
_FLAG_WITH_VALUE = re.compile(rf"^(--?{_SECRET_NAME}=)(.+)$", re.IGNORECASE)  # --token=abc
_FLAG = re.compile(rf"^--?{_SECRET_NAME}$", re.IGNORECASE)  # --token abc
_ASSIGNMENT = re.compile(rf"^({_SECRET_NAME}=)(.+)$", re.IGNORECASE)  # API_TOKEN=abc (env-style)
_AUTH_HEADER = re.compile(rf"^((?:proxy-)?authorization:\s*|{_SECRET_NAME}:\s*)(.+)$", re.IGNORECASE)  # X-Auth-Token: abc
#: Short flags whose next argument is a password, by tool (ssh's -p is a port: not listed).
_TOOL_SECRET_FLAGS = {"ipmitool": {"-P"}, "sshpass": {"-p"}, "mysql": {"-p"}}
#: Flags whose next argument is user:password.
_USER_PASSWORD_FLAGS = {"-u", "--user", "--proxy-user"}
_URL_CREDENTIALS = re.compile(r"(\w[\w+.-]*://)[^/@\s]+@")
_QUERY_SECRET = re.compile(rf"([?&]{_SECRET_NAME}=)[^&\s]+", re.IGNORECASE)


class NotConfigured(Exception):
    pass


class RungCommandFailed(Exception):
    pass


def argv(command: str | Sequence[str]) -> list[str]:
    """A command as an argument list: a list as given, a string split as a shell would
    split it (quotes kept together) but never run through one."""
    if isinstance(command, str):
        return shlex.split(command)
    return [str(part) for part in command]


def masked(command: str | Sequence[str]) -> str:
    """The command line as it may be stored and shown: secrets replaced by ***."""
    try:
        parts = argv(command)
    except ValueError:  # unbalanced quotes: mask what can be found in the raw text
        return _URL_CREDENTIALS.sub(rf"\1{HIDDEN}@", str(command))
    out: list[str] = []
    hide_next = user_next = False
    secret_flags: set[str] = set()
    for part in parts:
        if hide_next or user_next:
            user, sep, _password = part.partition(":")
            out.append(f"{user}:{HIDDEN}" if user_next and sep else HIDDEN if hide_next else part)
            hide_next = user_next = False
            continue
        secret_flags = _TOOL_SECRET_FLAGS.get(part.rsplit("/", 1)[-1], secret_flags)
        if _FLAG.match(part) or part in secret_flags:
            hide_next = True
            out.append(part)
            continue
        if part in _USER_PASSWORD_FLAGS:
            user_next = True
            out.append(part)
            continue
        part = _FLAG_WITH_VALUE.sub(rf"\1{HIDDEN}", part)
        part = _ASSIGNMENT.sub(rf"\1{HIDDEN}", part)
        part = _AUTH_HEADER.sub(rf"\1{HIDDEN}", part)
        part = _QUERY_SECRET.sub(rf"\1{HIDDEN}", part)
        out.append(_URL_CREDENTIALS.sub(rf"\1{HIDDEN}@", part))
    return shlex.join(out)


def masked_text(text: str) -> str:
    """A line of output with credentials in URLs, ``Authorization:`` headers and
    ``token=``-like assignments masked."""
    text = _URL_CREDENTIALS.sub(rf"\1{HIDDEN}@", text)
    text = re.sub(r"((?:proxy-)?authorization:\s*).+", rf"\1{HIDDEN}", text, flags=re.IGNORECASE)
    return re.sub(rf"\b({_SECRET_NAME}[=:]\s*)\S+", rf"\1{HIDDEN}", text, flags=re.IGNORECASE)


def rung_env(rung: str, device) -> dict[str, str]:
    """The whole environment of a rung's command: PATH and LANG from the agent's, and the
    device's ASICMON_* variables; nothing else of the agent's."""
    env = {name: os.environ[name] for name in KEPT_ENV if name in os.environ}
    env.setdefault("PATH", os.defpath)
    env.update(ASICMON_RUNG=rung, ASICMON_DEVICE_SERIAL=device.serial, ASICMON_HOST=device.host.name,
               ASICMON_WORKLOAD=device.workload or "")
    return env


def command_for(rung: str) -> str:
    """The rung's configured command line on this host ('' where not configured)."""
    return getattr(settings, SETTING[rung], "") or ""


def run_rung_command(rung: str, device) -> str:
    """Runs ``rung``'s command for ``device``; what it did, for the action's outcome (no
    command line in it: that is `masked(command_for(rung))`, for operators).
    Raises NotConfigured or RungCommandFailed (a non-zero exit, a timeout, a missing program)."""
    name = SETTING[rung]
    command = command_for(rung)
    if not command:
        what = {"restart_application": "restart-application", "reboot_host": "reboot"}[rung]
        raise NotConfigured(f"no {what} command configured on {device.host.name} ({name} is empty)")
    timeout = settings.AGENT_RUNG_TIMEOUT_S
    try:
        done = subprocess.run(  # noqa: S603 - the operator's own command line, from the agent's settings
            argv(command), env=rung_env(rung, device), capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        raise RungCommandFailed(f"{name} still running after {timeout:g} s: stopped") from None
    except (OSError, ValueError) as exc:
        raise RungCommandFailed(f"{name} could not start: {exc}") from None
    out = (done.stdout + done.stderr).strip().splitlines()
    said = f"; {masked_text(out[-1])}" if out else ""
    if done.returncode != 0:
        raise RungCommandFailed(f"{name}: exit {done.returncode}{said}")
    return f"{name}: exit 0{said}"
