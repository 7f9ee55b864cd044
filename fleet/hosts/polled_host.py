"""A host's device monitors, read together: what a poll reads (Django-free).

Two kinds of host are polled: an emulated host (`fleet.hosts.emulated_monitors.HostMonitor`, its state in a
file any worker may read) and the real devices of the machine an agent runs on
(`fleet.hosts.local.LocalHost`). Both are a `PolledHost`, the shape the poll, the control actions
and the agent rely on, and both build on `DeviceMonitors`: the Asicmon monitor of each
device by serial, refreshed together under a time budget per probe.
"""

from __future__ import annotations

from typing import Any, Protocol

from fleet.asicmon.errors.events import ErrorEvent
from fleet.asicmon.errors.sources import ErrorRouter
from fleet.asicmon.monitor import DEFAULT_TIMEOUT_S, DeviceMonitor, refresh_together

Snapshots = dict[str, dict[str, Any]]  # a snapshot per device serial


class PolledHost(Protocol):
    """A host whose devices a poll reads: ``poll`` refreshes them all and returns their
    snapshots by serial."""

    name: str
    probe_timeout: float

    @property
    def serials(self) -> list[str]: ...

    def monitor(self, serial: str) -> DeviceMonitor: ...

    def monitors(self) -> list[DeviceMonitor]: ...

    def snapshots(self) -> Snapshots: ...

    def poll(self, now: float | None = None) -> Snapshots: ...

    def drain_events(self) -> dict[str, list[ErrorEvent]]: ...


class DeviceMonitors:
    """The monitors of one host's devices, by serial."""

    def __init__(
        self, name: str, monitors: dict[str, DeviceMonitor], probe_timeout: float = DEFAULT_TIMEOUT_S
    ) -> None:
        self.name = name
        self.probe_timeout = probe_timeout
        self._monitors = monitors
        self.router = ErrorRouter()  # error events by bus address to the monitors' channels
        for serial, m in monitors.items():
            if m.bus_address:
                self.router.add(m.bus_address, m.events, serial, m.catalogue_name)

    @property
    def serials(self) -> list[str]:
        return list(self._monitors)

    def monitor(self, serial: str) -> DeviceMonitor:
        try:
            return self._monitors[serial]
        except KeyError:
            raise KeyError(f"no device {serial!r} on {self.name}") from None

    def monitors(self) -> list[DeviceMonitor]:
        return list(self._monitors.values())

    def snapshots(self) -> Snapshots:
        """The latest snapshot of every device, from the monitors' caches only."""
        return {serial: m.snapshot() for serial, m in self._monitors.items()}

    def refresh(self, now: float) -> None:
        """Refreshes every device at once, each probe within the time budget (a hung device
        is marked and delays nobody)."""
        refresh_together(self._monitors.values(), now, self.probe_timeout)

    def drain_events(self) -> dict[str, list[ErrorEvent]]:
        """Each device's error events since the last drain (merged, classified), by serial;
        events of no device of ours under ``""`` (kept, never dropped)."""
        out = {serial: found for serial, m in self._monitors.items() if (found := m.drain_events())}
        unrouted = self.router.unrouted.drain()
        if unrouted:
            out[""] = unrouted
        return out
