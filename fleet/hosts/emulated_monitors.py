"""The emulated fleet wired to Asicmon: one monitor per emulated device, compiled from its
type's Asimov spec, polled together (Django-free, like the libraries it joins).

`HostMonitor.poll` is what a polling worker calls each cycle: it advances the host's
emulator to ``now``, refreshes every device's monitor in parallel under a per-probe time
budget (a hung device is marked and delays nobody), persists the emulator state, and
returns every device's snapshot.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from emulator import EmulatedHost, FleetConfig
from emulator.config import DeviceSpec
from emulator.devices.driver_errors import DRIVER_FAULTS, bus_address
from emulator.state_store import StateStore
from fleet.asicmon.errors.kernel_log import KernelLogReader
from fleet.asicmon.monitor import DEFAULT_TIMEOUT_S, DeviceMonitor
from fleet.asimov.loader import monitor_class
from fleet.hosts.polled_host import DeviceMonitors

__all__ = ["HostMonitor", "device_monitor"]

HISTORY_KEY = "monitors"  # the monitors' previous readings, in the host's state file


def device_monitor(
    host: EmulatedHost,
    serial: str,
    spec_dirs: tuple[str | os.PathLike, ...] = (),
    timeout: float = DEFAULT_TIMEOUT_S,
) -> DeviceMonitor:
    """The monitor of one emulated device, compiled from its type's spec and bound to the
    device's emulated driver."""
    binding = host.binding(serial)
    device = host.spec.device(serial)
    klass = monitor_class(device.type, spec_dirs)
    monitor = klass(
        index=binding.index, files=binding.files, lib=binding.lib, serial=serial, timeout=timeout
    )
    if "emulator" in (klass.EVENTS or {}).get("sources", ()):
        monitor.bus_address = bus_address(device.index)
    return monitor


class HostMonitor(DeviceMonitors):
    """The monitors of an emulated host's devices, and the emulator they read (a
    `fleet.hosts.polled_host.PolledHost`)."""

    def __init__(
        self,
        host: EmulatedHost,
        monitors: dict[str, DeviceMonitor],
        probe_timeout: float = DEFAULT_TIMEOUT_S,
    ) -> None:
        super().__init__(host.name, monitors, probe_timeout)
        self.host = host
        self.kernel_log = KernelLogReader()  # the emulated driver's lines, as an agent reads them

    @classmethod
    def open(
        cls,
        cfg: FleetConfig,
        host: str,
        state_dir: str | os.PathLike | None = None,
        *,
        store: StateStore | None = None,
        probe_timeout: float = DEFAULT_TIMEOUT_S,
        spec_dirs: Iterable[str | os.PathLike] = (),
    ) -> HostMonitor:
        """Monitors for every device of ``host``; state persists in ``store``, or else
        under ``state_dir`` (neither keeps it in memory only). ``spec_dirs`` are searched for ``<type>.asimov``
        before the specs that ship with Asimov."""
        emu = EmulatedHost(cfg, host, Path(state_dir) if state_dir is not None else None, store=store)
        dirs = tuple(spec_dirs)
        monitors = {
            d.serial: device_monitor(emu, d.serial, dirs, probe_timeout) for d in emu.spec.devices
        }
        return cls(emu, monitors, probe_timeout)

    # -- devices ---------------------------------------------------------------------------
    @property
    def devices(self) -> list[DeviceSpec]:
        return list(self.host.spec.devices)

    # -- polling -----------------------------------------------------------------------------
    def poll(self, now: float | None = None) -> dict[str, dict[str, Any]]:
        """Advances the emulator to ``now`` (default: the wall clock), refreshes every
        device's monitor with a time budget per probe, saves the state, and returns the
        snapshots keyed by serial."""
        now = time.time() if now is None else now
        with self.host.locked():
            self.load_state(now)
            self.host.advance(now)
            self.refresh(now)
            lines = self.host.take_kernel_log()
            self.save_state()
        if lines:
            self.kernel_log.feed(lines)
            self.router.route(self.kernel_log.take())
        return self.snapshots()

    def load_state(self, now: float) -> None:
        """Under the host's lock: the emulator state, and with it the monitors' previous
        readings if another process polled this host since we did, so that its rates carry
        on instead of starting again (fresh devices at ``now`` when there is no state)."""
        if self.host.sync(now):
            for serial, rows in self.host.extra.get(HISTORY_KEY, {}).items():
                if serial in self._monitors:
                    self._monitors[serial].import_history(rows)

    def save_state(self) -> None:
        """Under the host's lock: the emulator state and the monitors' previous readings,
        in the host's one state file."""
        if self.host.store is not None:
            self.host.extra[HISTORY_KEY] = {serial: m.export_history() for serial, m in self._monitors.items()}
        self.host.save()

    # -- actions (persisted like the rest of the state) ---------------------------------------
    def _change(self, serial: str, action) -> None:
        self.monitor(serial)  # unknown serials fail before anything changes
        with self.host.locked():
            self.load_state(time.time())
            action()
            self.save_state()

    def inject_fault(self, serial: str, fault: str, persistent: bool = False) -> None:
        """Injects ``fault``. A driver error happens now: the emulator is moved to the wall
        clock first, so that its kernel-log lines carry the time it happened."""
        def inject() -> None:
            if fault in DRIVER_FAULTS:
                self.host.advance(time.time())
            self.host.inject_fault(serial, fault, persistent)

        self._change(serial, inject)

    def clear_fault(self, serial: str, fault: str) -> None:
        self._change(serial, lambda: self.host.clear_fault(serial, fault))

    def restart_workload(self, serial: str) -> list[str]:
        """The device's workload restarts (the ladder's first rung); the faults it cured."""
        cleared: list[str] = []
        self._change(serial, lambda: cleared.extend(self.host.restart_workload(serial)))
        return cleared

    def reboot_host(self) -> None:
        with self.host.locked():
            self.load_state(time.time())
            self.host.reboot_host()
            self.save_state()

    def diagnose(self, serial: str) -> tuple[bool, str]:
        """The emulated device's short diagnostic: fails while it is still faulty."""
        with self.host.locked():
            self.load_state(time.time())
            self.host.advance(time.time())
            return self.host.diagnose(serial)

    def reboot(self, serial: str) -> None:
        """Reboots a device through its monitor's ``reboot`` control action (the call its
        Asimov spec declares: a sysfs write, a C-library call, a GPU API call)."""
        self._change(serial, lambda: self.monitor(serial).control("reboot"))

    def faults(self, serial: str) -> dict[str, dict]:
        """Faults injected into a device (emulator truth, for tests and the CLI)."""
        with self.host.locked():
            self.load_state(time.time())
            return dict(self.host.state(serial).faults)
