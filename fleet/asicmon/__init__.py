"""Asicmon: the standard monitoring interface for accelerators (no Django).

The counter catalogue, a monitor per device with its stats cache and derived metrics
(compiled from the device type's Asimov spec), and `HostMonitor` to poll the devices of a
host together.
"""

from fleet.asicmon.catalogue import ALWAYS_PRESENT, CATALOGUE, Counter

__all__ = [
    "ALWAYS_PRESENT",
    "CATALOGUE",
    "Counter",
    "DeviceMonitor",
    "HostMonitor",
    "monitor_class",
]


def __getattr__(name: str):
    # Imported lazily: fleet.asimov's compiler imports the catalogue from here.
    if name == "HostMonitor":
        from fleet.asicmon.host import HostMonitor

        return HostMonitor
    if name == "DeviceMonitor":
        from fleet.asimov.runtime import DeviceMonitor

        return DeviceMonitor
    if name == "monitor_class":
        from fleet.asicmon.specs import monitor_class

        return monitor_class
    raise AttributeError(name)
