"""One emulated host: its devices' states, their drivers, and their persistence.

State lives in a `StateStore` (emulator.state_store): by default ``<state_dir>/<host>.json``,
written atomically under an exclusive lock on ``<state_dir>/<host>.lock``; or one Redis key
per host under a Redis lock, for processes on machines that share no disk. Several worker
processes can poll different hosts of a fleet -- or even the same host -- and a restarted
worker continues with the temperatures, leaks and counters the last one left. What a
poller keeps about the host (its monitors' previous readings) travels in the same state
(`EmulatedHost.extra`): one write per host and poll, and one read only when another process
wrote it since.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path

import orjson

from emulator.config import FleetConfig, HostSpec, find_host
from emulator.devices import driver_errors, physics
from emulator.devices.drivers import DRIVERS, DeviceBinding, Driver, DriverContext
from emulator.devices.physics import DevicePhysics
from emulator.devices.zoo import device_type
from emulator.noise import string_key
from emulator.state_store import FileStateStore, StateStore
from emulator.workloads.graph import op_time_us, workload_for

__all__ = ["EmulatedHost", "items_per_second"]

STATE_VERSION = 1
BATCH_ITEMS = {"recommendation": 256, "transformer": 8, "video_pipeline": 8}


@lru_cache(maxsize=64)
def items_per_second(device_type_name: str, sw_version: str) -> float:
    """Work items (samples, sequences, frames) a device serves per second at full load:
    one batch per pass over its workload graph with the cost model of its type."""
    workload = workload_for(device_type_name)
    pass_us = sum(
        op_time_us(n, device_type_name, sw_version) for n in workload.nodes if n.kind != "host"
    )
    return BATCH_ITEMS.get(workload.name, 1) * 1e6 / pass_us


class EmulatedHost:
    """The devices of one host. Not thread-safe by itself: hold `locked()` to change it."""

    def __init__(
        self,
        cfg: FleetConfig,
        host: str | HostSpec,
        state_dir: str | os.PathLike | None = None,
        *,
        store: StateStore | None = None,
    ) -> None:
        """State persists in ``store``, or else in files under ``state_dir``; with
        neither it stays in memory."""
        self.cfg = cfg
        self.spec = host if isinstance(host, HostSpec) else find_host(cfg, host)
        self.name = self.spec.name
        self.key = string_key(self.name)
        if store is None and state_dir is not None:
            store = FileStateStore(state_dir)
        self.store = store
        self.states: dict[str, DevicePhysics] = {}
        self.extra: dict = {}  # saved and loaded with the states, opaque to the emulator
        self.kernel_log: list[str] = []  # driver lines not yet taken by a poll (driver_errors)
        self._loaded_stamp = None  # the stamp of the state last read or written
        self._plan: list[tuple] | None = None
        self._thread_lock = threading.RLock()
        self._drivers: dict[str, Driver] = {}
        self._bindings: dict[str, DeviceBinding] = {}
        ctx = DriverContext(
            self.states, {d.serial: d for d in self.spec.devices}, cfg.hang_block_s, reset=self.reboot
        )
        by_driver: dict[str, list[str]] = {}
        for d in self.spec.devices:
            by_driver.setdefault(device_type(d.type).driver, []).append(d.serial)
        for name, serials in by_driver.items():
            driver = DRIVERS[name](ctx, serials)
            self._drivers[name] = driver
            self._bindings.update(driver.bindings())

    # -- state -----------------------------------------------------------------------
    @property
    def state_dir(self) -> Path | None:
        return self.store.directory if isinstance(self.store, FileStateStore) else None

    @property
    def state_path(self) -> Path | None:
        return self.store.path(self.name) if isinstance(self.store, FileStateStore) else None

    def _fresh_states(self, t: float) -> None:
        self.states.clear()
        for d in self.spec.devices:
            self.states[d.serial] = physics.new_state(
                device_type(d.type), d.serial, self.cfg.seed, t
            )

    def sync(self, now: float | None = None) -> bool:
        """Makes the in-memory state current with the stored state (another process may
        have written it), or creates fresh devices at ``now`` when there is no state yet.
        True when it read the state (the states and `extra` were replaced)."""
        found = None
        if self.store is not None:
            found = self.store.read(self.name, self._loaded_stamp if self.states else None)
        if found is not None:
            if found.body is None:
                return False
            where = self.store.where(self.name)
            try:
                data = json.loads(found.body)  # not orjson: it reads past-64-bit integers as floats
            except ValueError as e:
                raise ValueError(f"{where} holds no readable state ({e}); move it away") from None
            if not isinstance(data, dict) or data.get("version") != STATE_VERSION or data.get("seed") != self.cfg.seed:
                raise ValueError(f"{where} holds state of another fleet or format; move it away")
            loaded = {s: DevicePhysics.from_json(v) for s, v in data["devices"].items()}
            self.states.clear()
            self.states.update(loaded)  # the drivers hold this very dict
            for d in self.spec.devices:  # a device added to the layout since
                if d.serial not in self.states:
                    self.states[d.serial] = physics.new_state(
                        device_type(d.type), d.serial, self.cfg.seed, data["t"]
                    )
            self.extra = data.get("extra") or {}
            self.kernel_log = data.get("kernel_log") or []
            self._loaded_stamp = found.stamp
            return True
        if not self.states:
            self._fresh_states(time.time() if now is None else now)
        return False

    def save(self) -> None:
        """Writes the state to the store (hold `locked()`)."""
        if self.store is None:
            return
        data = {
            "version": STATE_VERSION,
            "seed": self.cfg.seed,
            "host": self.name,
            "t": self.now,
            "devices": {s: st.to_json() for s, st in self.states.items()},
            "extra": self.extra,
            "kernel_log": self.kernel_log,
        }
        try:
            body = orjson.dumps(data)
        except TypeError:  # a counter past 64 bits: the standard encoder takes any integer
            body = json.dumps(data, separators=(",", ":")).encode()
        self._loaded_stamp = self.store.write(self.name, body)

    @contextlib.contextmanager
    def locked(self) -> Iterator[EmulatedHost]:
        """Exclusive access to this host's state across threads and processes."""
        with self._thread_lock:
            if self.store is None:
                yield self
                return
            with self.store.locked(self.name):
                yield self

    @property
    def now(self) -> float:
        return max((s.t for s in self.states.values()), default=0.0)

    # -- simulation ----------------------------------------------------------------------
    def advance(self, now: float) -> None:
        """Moves every device forward to ``now`` (earlier times are ignored)."""
        if self._plan is None:  # what each device's physics needs, looked up once
            self._plan = [
                (d.serial, device_type(d.type), workload_for(d.type).name, items_per_second(d.type, d.sw_version))
                for d in self.spec.devices
            ]
        states, key = self.states, self.key
        for serial, dtype, workload, items_per_s in self._plan:
            physics.advance(states[serial], dtype, now, workload, items_per_s, key)
            if states[serial].faults:
                self._due_lines(serial)

    def state(self, serial: str) -> DevicePhysics:
        try:
            return self.states[serial]
        except KeyError:
            raise KeyError(f"no device {serial!r} on {self.name}") from None

    def inject_fault(self, serial: str, fault: str, persistent: bool = False) -> None:
        if fault in driver_errors.DRIVER_FAULTS:
            d = self.spec.device(serial)
            driver_errors.inject(self.state(serial), fault, driver_errors.bus_address(d.index), self.name,
                                 self.kernel_log, persistent)
            return
        physics.inject(self.state(serial), fault, persistent)

    # -- driver errors (emulator.devices.driver_errors) ---------------------------------------------
    def _due_lines(self, serial: str) -> None:
        d = self.spec.device(serial)
        driver_errors.due_lines(self.states[serial], self.states[serial].t, driver_errors.bus_address(d.index),
                                self.name, self.kernel_log)

    def take_kernel_log(self) -> list[str]:
        """The driver lines written since the last take (hold `locked()`; save after)."""
        lines, self.kernel_log = self.kernel_log, []
        return lines

    def restart_workload(self, serial: str) -> list[str]:
        return driver_errors.restart_workload(self.state(serial))

    def reboot_host(self) -> None:
        """Every device of the host restarts: faults that only a host reboot cures go too."""
        for state in self.states.values():
            kept = driver_errors.survives(state, "reboot_host")
            physics.reboot(state, device_type(state.type), self.cfg.reboot_s)
            state.faults.update(kept)

    def diagnose(self, serial: str) -> tuple[bool, str]:
        return driver_errors.diagnose(self.state(serial))

    def clear_fault(self, serial: str, fault: str) -> None:
        if fault in driver_errors.DRIVER_FAULTS:
            info = self.state(serial).faults.pop(fault, None)
            if info and info.get("hang"):
                self.state(serial).faults.pop("hang", None)
            return
        physics.clear(self.state(serial), fault)

    def reboot(self, serial: str) -> None:
        """A device reset: what only a host reboot or an inspection cures stays."""
        state = self.state(serial)
        kept = driver_errors.survives(state, "reset_device")
        physics.reboot(state, device_type(state.type), self.cfg.reboot_s)
        state.faults.update(kept)

    def occupy(self, serial: str, until: float) -> None:
        """A distributed job holds the device at full load until ``until`` (epoch s)."""
        state = self.state(serial)
        physics.occupy(state, device_type(state.type), until)

    # -- drivers -------------------------------------------------------------------------
    def binding(self, serial: str) -> DeviceBinding:
        """What a monitor needs to reach this device through its driver."""
        try:
            return self._bindings[serial]
        except KeyError:
            raise KeyError(f"no device {serial!r} on {self.name}") from None

    def describe(self, serial: str) -> dict:
        """The device as its driver shows it (for humans)."""
        d = self.spec.device(serial)
        return self._drivers[device_type(d.type).driver].describe(serial)

    def materialise(self, root: str | os.PathLike) -> list[Path]:
        """Writes the file trees of this host's file-based devices as real files."""
        out = []
        for serial in self.states:
            files = self._bindings[serial].files
            if files is not None and hasattr(files, "materialise"):
                out.append(files.materialise(Path(root) / self.name))
        return out
