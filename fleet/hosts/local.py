"""The real accelerators of this machine: finding them, naming them, polling them together.

NVIDIA GPUs are read through NVML (the nvidia-ml-py package) with the ``nvml`` spec, Linux
hwmon devices with the ``hwmon`` spec. Every device gets a serial that is stable across
reboots and unique across the fleet (see `nvml_serial` and `hwmon_serial`), never a kernel
or driver index that can be renumbered.

    from fleet.hosts.local import discover
    found = discover("my-host")
    for serial, snapshot in found.host.poll().items():
        print(serial, snapshot["temperature_c"], snapshot["driver_status"])
"""

from __future__ import annotations

import glob
import logging
import os
import re
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fleet.asicmon.errors.kernel_log import normalise_address
from fleet.asicmon.errors.sources import NvmlXidEvents, RasCounters
from fleet.asicmon.errors.state import SourceState
from fleet.asicmon.monitor import DEFAULT_TIMEOUT_S, DeviceMonitor
from fleet.asimov.errors import SpecErrors
from fleet.asimov.loader import SPECS_DIR, monitor_class
from fleet.hosts.polled_host import DeviceMonitors

__all__ = [
    "Discovery",
    "FileRoot",
    "LocalDevice",
    "LocalHost",
    "discover",
    "folder_devices",
    "hwmon_devices",
    "hwmon_serial",
    "link_serial",
    "nvml_devices",
    "nvml_serial",
    "spec_devices",
    "spec_files",
]

log = logging.getLogger(__name__)

DEFAULT_HWMON_ROOT = "/sys/class/hwmon"
# A PCI function address as Linux names it: domain:bus:device.function.
PCI_ADDRESS = re.compile(r"[0-9a-f]{4,}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]")
VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


@dataclass
class LocalDevice:
    """One device found on this machine, with the monitor that reads it."""

    serial: str
    device_type: str
    monitor: DeviceMonitor
    slot: int  # its position among the devices of its kind here (a hint, not an identity)


@dataclass
class Discovery:
    """What `discover` found: the devices, and why some spec could not be used."""

    host: LocalHost
    errors: list[str] = field(default_factory=list)


class FileRoot:
    """A real directory for file bindings (sysfs, hwmon): ``read_text`` of a relative path,
    never one that leaves the directory (a spec's path template filled with a driver's text)."""

    def __init__(self, root: str | Path) -> None:
        self.root = str(root).rstrip("/") + "/"

    @staticmethod
    def _inside(path: str) -> str:
        if path.startswith("/") or ".." in path.split("/"):
            raise PermissionError(f"{path!r} is outside the device's folder")
        return path

    def read_text(self, path: str) -> str:
        with open(self.root + self._inside(path)) as f:  # noqa: PTH123 - a plain open is the cheapest read of a sysfs file
            return f.read()

    def write_text(self, path: str, text: str) -> None:
        """A control action's sysfs write (``action reboot = write("reset", "1")``). The file
        must exist, as a driver's attribute does: a missing one is an error, never created."""
        fd = os.open(self.root + self._inside(path), os.O_WRONLY | os.O_TRUNC)
        with os.fdopen(fd, "w") as f:
            f.write(text)

    def __repr__(self) -> str:
        return f"FileRoot({self.root!r})"


# --- Serials ----------------------------------------------------------------------------


def nvml_serial(lib: Any, handle: Any) -> str:
    """The GPU's UUID ("GPU-…"): the same on every boot, unique across all GPUs."""
    uuid = lib.nvmlDeviceGetUUID(handle)
    return uuid.decode() if isinstance(uuid, bytes) else str(uuid)


def _read(path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError:
        return ""


def link_serial(device_type: str, host: str, folder: Path, link: str) -> str:
    """A name for the device in ``folder`` from the device its ``link`` points at, which
    survives the kernel renumbering folders such as hwmonN.

    ``<type>:<host>:<PCI address>:<name>`` when the link points at (or below) a PCI function,
    else ``<type>:<host>:<device name>:<name>`` (a platform device such as coretemp.0), else
    ``<type>:<host>:<name>``, where <name> is the folder's ``name`` file (the chip). The host
    makes it unique across the fleet: two machines have the same PCI addresses and chips.
    """
    name = _read(folder / "name") or folder.name
    target = folder / link
    if target.exists():
        resolved = target.resolve()
        pci = next((p.name for p in (resolved, *resolved.parents) if PCI_ADDRESS.fullmatch(p.name)), None)
        return f"{device_type}:{host}:{pci or resolved.name}:{name}"
    return f"{device_type}:{host}:{name}"


def hwmon_serial(host: str, folder: Path) -> str:
    return link_serial("hwmon", host, folder, "device")


def _folder_serial(klass: type[DeviceMonitor], host: str, folder: Path, rule: list | None) -> str:
    if rule is None:
        return f"{klass.SPEC}:{host}:{folder.name}"
    kind, name = rule
    if kind == "link":
        return link_serial(klass.SPEC, host, folder, name)
    serial = _read(folder / name)
    if not serial:
        raise ValueError(f"{folder / name} is empty: no serial for the device in {folder}")
    return serial


# --- Devices of a spec ----------------------------------------------------------------------


def nvml_devices(
    lib: Any = None, *, klass: type[DeviceMonitor] | None = None, timeout: float = DEFAULT_TIMEOUT_S
) -> list[LocalDevice]:
    """One device per NVIDIA GPU; none without the NVML library, a driver or a GPU."""
    if lib is None:
        try:
            import pynvml as lib
        except ImportError:
            return []
    try:
        lib.nvmlInit()
        count = lib.nvmlDeviceGetCount()
        serials = [nvml_serial(lib, lib.nvmlDeviceGetHandleByIndex(i)) for i in range(count)]
    except Exception:  # no driver, no library, no GPU: nothing to monitor here
        return []
    klass = klass or monitor_class("nvml")
    out = []
    for i, serial in enumerate(serials):
        monitor = klass(index=i, lib=lib, serial=serial, timeout=timeout)
        monitor.bus_address = _nvml_address(lib, i)
        out.append(LocalDevice(serial, klass.SPEC, monitor, i))
    return out


def _nvml_address(lib: Any, index: int) -> str:
    """The GPU's PCI address, where its kernel-log lines name it ("" if NVML will not say)."""
    try:
        bus = lib.nvmlDeviceGetPciInfo(lib.nvmlDeviceGetHandleByIndex(index)).busId
    except Exception:  # an old driver or a test double without it
        return ""
    return normalise_address(bus.decode() if isinstance(bus, bytes) else str(bus))


def _folder_address(folder: Path) -> str:
    """The PCI address of the device behind a sysfs folder (its ``device`` link), or ""."""
    target = folder / "device"
    if not target.exists():
        return ""
    resolved = target.resolve()
    pci = next((p.name for p in (resolved, *resolved.parents) if PCI_ADDRESS.fullmatch(p.name)), "")
    return normalise_address(pci) if pci else ""


def expand(pattern: str, variables: Mapping[str, str]) -> str:
    """``${NAME}`` in a discovery pattern, from the settings and the environment."""

    def value(match: re.Match) -> str:
        name = match.group(1)
        if name not in variables:
            raise LookupError(f"${{{name}}} in the discover pattern {pattern!r} is not set")
        return str(variables[name])

    return VARIABLE.sub(value, pattern)


def folder_devices(
    klass: type[DeviceMonitor], host: str, variables: Mapping[str, str], *, timeout: float = DEFAULT_TIMEOUT_S
) -> list[LocalDevice]:
    """One device per folder the spec's ``discover folders(...)`` rule matches."""
    rule = klass.DISCOVERY
    pattern = expand(rule["pattern"], variables)
    folders = sorted(
        path for path in map(Path, glob.glob(pattern))  # noqa: PTH207 - Path.glob takes no absolute pattern
        if path.is_dir() and all((path / name).exists() for name in rule["requires"])
    )
    out, seen = [], {}
    for slot, folder in enumerate(folders):
        serial = _folder_serial(klass, host, folder, rule["serial"])
        # Two identical chips with no device behind them: nothing stable tells them apart.
        seen[serial] = seen.get(serial, 0) + 1
        if seen[serial] > 1:
            serial = f"{serial}#{seen[serial]}"
        monitor = klass(files=FileRoot(folder), serial=serial, timeout=timeout)
        monitor.bus_address = _folder_address(folder)
        out.append(LocalDevice(serial, klass.SPEC, monitor, slot))
    return out


def hwmon_devices(
    host: str, root: str | os.PathLike = DEFAULT_HWMON_ROOT, *, timeout: float = DEFAULT_TIMEOUT_S
) -> list[LocalDevice]:
    """One device per hwmon folder under ``root`` that has a name and a temperature sensor."""
    return folder_devices(monitor_class("hwmon"), host, {"HWMON_ROOT": str(root)}, timeout=timeout)


def spec_devices(
    klass: type[DeviceMonitor], host: str, variables: Mapping[str, str], *,
    nvml_lib: Any = None, timeout: float = DEFAULT_TIMEOUT_S,
) -> list[LocalDevice]:
    """The devices of this machine that a compiled spec's ``discover`` statement finds."""
    rule = klass.DISCOVERY
    if not rule:
        return []  # a spec for emulated devices only
    if rule["rule"] == "nvml":
        return nvml_devices(nvml_lib, klass=klass, timeout=timeout)
    return folder_devices(klass, host, variables, timeout=timeout)


# --- This machine ---------------------------------------------------------------------


def spec_files(spec_dirs: Iterable[str | os.PathLike] = ()) -> list[Path]:
    """Every spec: those in ``spec_dirs``, then the built-in ones; the first of a name wins."""
    paths: dict[str, Path] = {}
    for folder in (*spec_dirs, SPECS_DIR):
        for path in sorted(Path(folder).glob("*.asimov")):
            paths.setdefault(path.stem, path)
    return list(paths.values())


def discover(
    host: str,
    *,
    hwmon_root: str | os.PathLike = DEFAULT_HWMON_ROOT,
    spec_dirs: Iterable[str | os.PathLike] = (),
    variables: Mapping[str, str] | None = None,
    nvml_lib: Any = None,
    probe_timeout: float = DEFAULT_TIMEOUT_S,
    error_state: SourceState | None = None,
) -> Discovery:
    """Every device of this machine that some spec's ``discover`` statement finds: the
    built-in specs (NVML GPUs, hwmon sensors) and those in ``spec_dirs``. A spec that cannot
    be used (a compile error, with its file, line and column) is reported in ``errors`` and
    the others still count. ``${NAME}`` in patterns comes from ``variables``, HWMON_ROOT and
    the environment. ``error_state``: the RAS counters' last readings to count from (an
    agent's, kept across its restarts)."""
    variables = {**os.environ, "HWMON_ROOT": str(hwmon_root), **(variables or {})}
    dirs = tuple(Path(d) for d in spec_dirs)
    devices: dict[str, LocalDevice] = {}
    errors: list[str] = []
    for path in spec_files(dirs):
        try:
            klass = monitor_class(path.stem, dirs)
            found = spec_devices(klass, host, variables, nvml_lib=nvml_lib, timeout=probe_timeout)
        except SpecErrors as exc:
            errors.append(str(exc))
            continue
        except (LookupError, OSError, ValueError) as exc:
            errors.append(f"{path}: {exc}")
            continue
        for device in found:
            devices.setdefault(device.serial, device)
    return Discovery(LocalHost(host, list(devices.values()), probe_timeout, error_state), errors)


class LocalHost(DeviceMonitors):
    """The real devices of this machine, polled together (a `fleet.hosts.polled_host.PolledHost`, as an
    emulated host's `HostMonitor` is)."""

    def __init__(self, name: str, devices: list[LocalDevice], probe_timeout: float = DEFAULT_TIMEOUT_S,
                 error_state: SourceState | None = None):
        super().__init__(name, {d.serial: d.monitor for d in devices}, probe_timeout)
        self.devices = devices
        self.error_state = error_state
        self.event_sources = _event_sources(devices, error_state)

    def poll(self, now: float | None = None) -> dict[str, dict[str, Any]]:
        """Refreshes every device at once, each probe within the time budget (a hung device
        is marked and delays nobody), reads the error sources that are read by polling
        (NVML's XID events, amdgpu's RAS counters), and returns the snapshots by serial."""
        now = time.time() if now is None else now
        self.refresh(now)
        for source in self.event_sources:
            try:
                self.router.route(source.read())
            except Exception as exc:  # a source failing costs its events, never the poll
                log.warning("error events of %s not read: %s", type(source).__name__, exc)
        return self.snapshots()


def _event_sources(devices: list[LocalDevice], state: SourceState | None = None) -> list:
    """The polled error sources the devices' specs name (``events ... from nvml, ras_sysfs``);
    RAS counters count from ``state``'s readings where it has them."""
    sources: list = []
    nvml = {d.monitor.bus_address: d.monitor for d in devices
            if "nvml" in (d.monitor.EVENTS or {}).get("sources", ()) and d.monitor.bus_address}
    if nvml:
        first = next(iter(nvml.values()))
        try:
            handles = {a: first.lib.nvmlDeviceGetHandleByIndex(m.index) for a, m in nvml.items()}
            sources.append(NvmlXidEvents(first.lib, handles))
        except Exception as exc:  # no event support (a virtual GPU, an old driver)
            log.warning("NVML XID events not available: %s", exc)
    for d in devices:
        m = d.monitor
        ras = Path(getattr(m.files, "root", "/nonexistent"), "device", "ras")
        if "ras_sysfs" in (m.EVENTS or {}).get("sources", ()) and m.bus_address and ras.is_dir():
            baseline = state.ras_baseline(m.bus_address) if state is not None else None
            sources.append(RasCounters(m.files, m.bus_address, prefix="device/ras/", baseline=baseline))
    return sources


if __name__ == "__main__":
    import socket

    found = discover(socket.gethostname(), hwmon_root=os.environ.get("HWMON_ROOT", DEFAULT_HWMON_ROOT))
    for error in found.errors:
        print("error:", error)
    if not found.host.devices:
        print("no NVML GPUs or hwmon sensors found")
    for serial, snap in found.host.poll().items():
        print(serial, {k: v for k, v in snap.items() if v is not None})
