"""Monitors for the real accelerators of this machine: NVIDIA GPUs through NVML (the
nvidia-ml-py package) and Linux hwmon devices, with the ``nvml`` and ``hwmon`` specs.

    from fleet.asicmon.local import local_monitors
    for name, m in local_monitors().items():
        m.refresh()
        print(name, m.get("temperature_c"), m.get("driver_status"))
"""

from __future__ import annotations

from pathlib import Path

from fleet.asicmon.specs import monitor_class
from fleet.asimov.runtime import Binding, DeviceMonitor, FileRoot

__all__ = ["hwmon_monitors", "local_monitors", "nvml_monitors"]


def nvml_monitors(lib=None) -> dict[str, DeviceMonitor]:
    """One monitor per NVIDIA GPU, keyed "nvml:<index>"; empty without NVML or GPUs."""
    if lib is None:
        try:
            import pynvml as lib
        except ImportError:
            return {}
    try:
        lib.nvmlInit()
        count = lib.nvmlDeviceGetCount()
    except Exception:  # no driver, no library, no GPU: nothing to monitor here
        return {}
    klass = monitor_class("nvml")
    return {f"nvml:{i}": klass(Binding(index=i, lib=lib), serial=f"nvml:{i}") for i in range(count)}


def hwmon_monitors(root: str | Path = "/sys/class/hwmon") -> dict[str, DeviceMonitor]:
    """One monitor per hwmon device with a temperature sensor, keyed "hwmon:<chip>:<dir>"."""
    root = Path(root)
    if not root.is_dir():
        return {}
    klass = monitor_class("hwmon")
    out = {}
    for folder in sorted(root.iterdir()):
        if (folder / "temp1_input").exists() and (folder / "name").exists():
            chip = (folder / "name").read_text().strip()
            key = f"hwmon:{chip}:{folder.name}"
            out[key] = klass(Binding(files=FileRoot(folder)), serial=key)
    return out


def local_monitors() -> dict[str, DeviceMonitor]:
    return {**nvml_monitors(), **hwmon_monitors()}


if __name__ == "__main__":
    monitors = local_monitors()
    if not monitors:
        print("no NVML GPUs or hwmon sensors found")
    for name, monitor in monitors.items():
        snap = monitor.refresh()
        shown = {k: v for k, v in snap.items() if v is not None}
        print(name, shown)
