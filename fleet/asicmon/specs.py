"""Finding and loading the compiled Asimov monitor module of a device type."""

from __future__ import annotations

import os
import threading
from pathlib import Path

from fleet.asimov.runtime import DeviceMonitor

__all__ = ["SPECS_DIR", "find_spec", "monitor_class"]

SPECS_DIR = Path(__file__).resolve().parent.parent / "asimov" / "specs"
_CACHE: dict[tuple[str, int], type[DeviceMonitor]] = {}
_LOCK = threading.Lock()


def find_spec(device_type: str, spec_dirs: tuple[str | os.PathLike, ...] = ()) -> Path | None:
    for folder in (*spec_dirs, SPECS_DIR):
        path = Path(folder) / f"{device_type}.asimov"
        if path.exists():
            return path
    return None


def monitor_class(
    device_type: str, spec_dirs: tuple[str | os.PathLike, ...] = ()
) -> type[DeviceMonitor]:
    """The monitor class compiled from ``<device_type>.asimov`` (cached per file version)."""
    path = find_spec(device_type, spec_dirs)
    if path is None:
        searched = ", ".join(str(p) for p in (*spec_dirs, SPECS_DIR))
        raise LookupError(
            f"no Asimov spec for device type {device_type!r}: looked for {device_type}.asimov in {searched}"
        )
    from fleet.asimov.loader import load_monitor_class

    key = (str(path), path.stat().st_mtime_ns)
    with _LOCK:
        klass = _CACHE.get(key)
        if klass is None:
            klass = _CACHE[key] = load_monitor_class(path)
    return klass
