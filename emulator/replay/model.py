"""What a replay is made of: its settings, its virtual clock and its results (per fault, per
job, per policy). `emulator.replay.engine` plays them; `emulator.replay.policy` decides."""

from __future__ import annotations

import dataclasses
from collections import Counter
from dataclasses import dataclass, field

from emulator.replay.classes import Signal
from emulator.replay.history import Fault

__all__ = ["JobResult", "Outcome", "PolicyResult", "Settings", "VirtualClock", "settings_with"]


@dataclass
class Settings:
    nodes: int = 400
    devices_per_node: int = 8  # an assumption for the shared history: it does not say
    horizon_s: float | None = None  # default: the history's last end
    # Detection (virtual seconds from the fault's start to the event that shows it).
    xid_detect_s: float = 2.0  # the kernel-log follower reads the Xid line
    poll_s: float = 15.0  # a health rule on a polled metric fires on the next poll
    hung_detect_s: float = 30.0  # a read that does not answer times out
    person_delay_s: float = 4 * 3600.0  # a person notices (no automation; invisible faults)
    # The ladder (defaults: dashboard/settings.py's).
    max_attempts: int = 3
    window_s: float = 86400.0
    breaker_share: float = 0.1
    breaker_min_devices: int = 3
    breaker_window_s: float = 600.0
    offender_incidents: int = 3
    offender_window_s: float = 30 * 86400.0
    unavailable_rungs: tuple[str, ...] = ()  # rungs no host can run (skipped)
    rung_s: dict = field(default_factory=lambda: {"restart_application": 60.0, "reset_device": 120.0,
                                                  "reboot_host": 600.0})
    check_s: float = 120.0  # the gate's diagnostic after a repair (e.g. dcgmi diag -r 1)
    diagnostic: bool = True  # False: no diagnostic; a device returns on its health after a poll
    check_timeout_s: float = 300.0  # LADDER_CHECK_TIMEOUT_S: a device not answering after its rung climbs
    max_per_workload: int = 1  # LADDER_MAX_PER_WORKLOAD: the blast radius
    # Repeat offenders: pulled for inspection when flagged (a person acts on the flag).
    pull_offenders: bool = True
    inspection_s: float = 2 * 86400.0  # how long a pulled device is out for inspection
    # Jobs: sizes in servers; the rest of the fleet is the spare pool.
    jobs: tuple[int, ...] = (128,) + (8,) * 30
    checkpoint_s: float = 1800.0
    restart_s: float = 600.0
    # A job's own watchdog (e.g. NCCL's timeout) that restarts it without the failed server
    # whatever the policy does; None: a job waits for the policy to take the server out.
    job_watchdog_s: float | None = None


class VirtualClock:
    """The replay's only clock: it moves when the replay says so."""

    def __init__(self) -> None:
        self.now = 0.0

    def advance(self, to: float) -> float:
        self.now = max(self.now, to)
        return self.now


@dataclass
class Outcome:
    fault: Fault
    signal: Signal
    device: int  # the device index on its server (-1: the whole server)
    detect_s: float  # absolute virtual time
    isolate_s: float
    back_s: float
    rungs: list[tuple[str, str]] = field(default_factory=list)  # (rung, outcome)
    reboots: list[float] = field(default_factory=list)  # when host reboots took the server's other devices
    person: bool = False
    seen_by_monitor: bool = False


@dataclass
class JobResult:
    size: int
    productive_s: float = 0.0
    interruptions: int = 0
    lost_s: Counter = field(default_factory=Counter)  # by reason: checkpoint, detection, restart, capacity

    def ettr(self, horizon: float) -> float:
        return self.productive_s / horizon if horizon else 1.0


@dataclass
class PolicyResult:
    policy: str
    outcomes: list[Outcome]
    device_out_s: dict[tuple[str, int], float]  # (server, device) -> seconds out of service
    device_spans: dict[tuple[str, int], list[tuple[float, float]]]  # when, merged
    flagged: dict[tuple[str, int], float]  # repeat offenders -> when flagged
    breaker_trips: int
    jobs: list[JobResult]
    lost_by_class: Counter  # GPU-seconds lost to jobs, by fault class
    pulls: list[Outcome] = field(default_factory=list)  # repeat offenders pulled for inspection


def settings_with(data: object, where: str, base: Settings | None = None) -> Settings:
    """``base`` (default: the defaults) with the fields ``data`` (a JSON object) sets, each
    checked against its default's type; a ValueError says which field and why."""
    if not isinstance(data, dict):
        raise ValueError(f"{where}: settings are a JSON object of {{setting: value}}")
    s = dataclasses.replace(base) if base is not None else Settings()
    fields = {f.name: f for f in dataclasses.fields(Settings)}
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise ValueError(f"{where}: unknown settings {', '.join(unknown)} (known: {', '.join(sorted(fields))})")
    for name, value in data.items():
        setattr(s, name, _checked(name, value, getattr(Settings(), name), fields[name].type, where))
    return s


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _checked(name: str, value: object, default: object, declared: str, where: str) -> object:
    said = f"{where}: {name}: {value!r}"
    if value is None and "None" in str(declared):
        return None
    if isinstance(default, bool):
        if not isinstance(value, bool):
            raise ValueError(f"{said} is not true or false")
        return value
    if isinstance(default, int | float) or "float" in str(declared):
        if not _number(value) or value < 0:
            raise ValueError(f"{said} is not a number >= 0")
        if isinstance(default, int) and not isinstance(default, bool) and value != int(value):
            raise ValueError(f"{said} is not a whole number")
        return type(default)(value) if default is not None else float(value)
    if isinstance(default, tuple):
        if not isinstance(value, list | tuple):
            raise ValueError(f"{said} is not a list")
        kind = int if name == "jobs" else str
        if any(not isinstance(v, kind) or isinstance(v, bool) or (kind is int and v < 1) for v in value):
            raise ValueError(f"{said}: every entry is {'a server count >= 1' if kind is int else 'a rung name'}")
        return tuple(value)
    if isinstance(default, dict):
        if not isinstance(value, dict) or set(value) - set(default) or not all(map(_number, value.values())):
            raise ValueError(f"{said}: seconds by rung, of {', '.join(default)}")
        return {**default, **value}
    return value
