"""Asicmon: the standard monitoring interface for accelerators (no Django).

The counter catalogue and a monitor per device with its stats cache and derived metrics.
Asicmon knows neither Asimov nor the emulator: `fleet.asimov` compiles specs into
`DeviceMonitor` subclasses, and `fleet.hosts.emulated_monitors` / `fleet.hosts.local` wire them to devices.
"""

from fleet.asicmon.catalogue import ALWAYS_PRESENT, CATALOGUE, RUNTIME_COUNTERS, CounterDef
from fleet.asicmon.monitor import DEFAULT_TIMEOUT_S, DeviceMonitor, refresh_together

__all__ = [
    "ALWAYS_PRESENT",
    "CATALOGUE",
    "DEFAULT_TIMEOUT_S",
    "RUNTIME_COUNTERS",
    "CounterDef",
    "DeviceMonitor",
    "refresh_together",
]
