"""The agent's view of its machine: the devices its specs find, found again now and then."""

import logging
import threading
from pathlib import Path

from django.conf import settings

from fleet.asicmon.errors.state import SourceState
from fleet.hosts.local import Discovery, LocalHost, discover

log = logging.getLogger(__name__)

_lock = threading.Lock()
_current: Discovery | None = None


_state: SourceState | None = None
_state_lock = threading.Lock()  # apart from _lock: discovery, under _lock, asks for the state


def error_state() -> SourceState:
    """What this agent's error sources had read (AGENT_STATE_DIR/error-sources.json), loaded
    once: the kernel log's position and the RAS counters' last readings, kept across restarts."""
    global _state
    with _state_lock:
        if _state is None:
            _state = SourceState(Path(settings.AGENT_STATE_DIR) / "error-sources.json")
        return _state


def _discover() -> Discovery:
    return discover(
        settings.AGENT_HOST,
        hwmon_root=settings.HWMON_ROOT,
        spec_dirs=tuple(settings.ASIMOV_SPEC_DIRS),
        probe_timeout=settings.PROBE_TIMEOUT,
        error_state=error_state(),
    )


def agent_discovery() -> Discovery:
    """This machine's devices, found from the settings (AGENT_HOST, HWMON_ROOT,
    ASIMOV_SPEC_DIRS) the first time; a spec that cannot be used is logged, the rest count."""
    global _current
    with _lock:
        if _current is None:
            _current = _discover()
            for error in _current.errors:
                log.error("spec not used: %s", error)
        return _current


def agent_host() -> LocalHost:
    return agent_discovery().host


def rediscover() -> Discovery:
    """Look again: new devices join, vanished ones leave. A device still there keeps its
    monitor (and so its rate history) unless its spec changed. New spec errors are logged."""
    global _current
    old = agent_discovery()
    fresh = _discover()
    kept = {d.serial: d for d in old.host.devices}
    devices = [
        kept[d.serial] if d.serial in kept and type(kept[d.serial].monitor) is type(d.monitor) else d
        for d in fresh.host.devices
    ]
    for error in set(fresh.errors) - set(old.errors):
        log.error("spec not used: %s", error)
    with _lock:
        _current = Discovery(LocalHost(old.host.name, devices, old.host.probe_timeout, old.host.error_state), fresh.errors)
    return _current


def forget() -> None:
    """Start again from nothing (tests, and a changed AGENT_HOST)."""
    global _current, _state
    with _lock, _state_lock:
        _current = None
        _state = None
