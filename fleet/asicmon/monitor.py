"""The Asicmon device monitor: one device's stats cache, refreshed from its driver.

A device type's monitor is a subclass of `DeviceMonitor` that only says how to probe its
driver (``_open`` for what is read once, ``_probe`` for what is read every refresh); Asimov
compiles one from each spec. Everything else lives here: the stats cache, refreshes under a
time budget, periodic refresh, thread safety, rate and wrap arithmetic, and the mapping of
driver errors to a driver status.

Thread safety: a refresh builds a complete new snapshot dict and publishes it with one
reference assignment; readers only ever see a whole snapshot, old or new, never a mix.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from typing import Any

from fleet.asicmon.catalogue import CATALOGUE, RUNTIME_COUNTERS, CounterDef
from fleet.asicmon.errors.events import ErrorEvent, EventChannel

__all__ = ["DEFAULT_TIMEOUT_S", "DeviceMonitor", "PendingRefresh", "refresh_together"]

DEFAULT_TIMEOUT_S = 0.5
_EXECUTOR = ThreadPoolExecutor(max_workers=64, thread_name_prefix="asicmon-probe")
_BLANK = dict.fromkeys(CATALOGUE)
_KEEP_ON_ERROR = tuple(
    name for name, c in CATALOGUE.items() if c.kind == "info" and name != "driver_error"
)


@dataclass
class PendingRefresh:
    now: float
    started: float
    future: Future | None = None
    result: tuple | None = None  # (values, status, error) when done inline
    wait: bool = True  # False: a device known hung; never wait for its probe
    began: float | None = None  # when a probe thread took the probe up (perf_counter)


def refresh_together(monitors: Iterable[DeviceMonitor], now: float, budget_s: float) -> None:
    """Refreshes ``monitors`` in parallel; every probe shares one deadline ``budget_s`` from
    now, so a hung device is marked hung and delays nobody."""
    pending = [(m, m.begin_refresh(now)) for m in monitors]
    deadline = time.perf_counter() + budget_s
    for m, p in pending:
        m.finish_refresh(p, deadline)


QUEUE_GRACE = 3.0  # a probe still queued at its deadline waits this many budgets more to start


def _await(pending: PendingRefresh, deadline: float | None) -> tuple:
    """The result of a probe submitted to a probe thread, by ``deadline``. A probe that no
    thread has taken up by then is not the device's fault (with many hosts polled at once it
    queues behind other probes, on a loaded machine): it gets its budget from when it starts,
    if it starts within `QUEUE_GRACE` budgets. Raises FutureTimeout for a device that does
    not answer in time."""
    future = pending.future
    if deadline is None:
        return future.result()
    if not pending.wait:
        return future.result(timeout=0.0)
    budget = deadline - pending.started
    limit = deadline
    while True:
        try:
            return future.result(timeout=max(0.0, limit - time.perf_counter()))
        except FutureTimeout:
            now = time.perf_counter()
            began = pending.began
            if began is None and now < deadline + QUEUE_GRACE * budget:
                limit = now + min(0.02, budget)  # still queued: look again shortly
            elif began is not None and began + budget > now:
                limit = began + budget  # started late: its own budget from its start
            else:
                raise


# The control actions a spec may declare (``action NAME = …``).
CONTROL_ACTIONS = ("reboot",)


class ControlNotDeclared(Exception):
    """The device's spec declares no such action (its devices go to repair instead)."""


class ControlFailed(Exception):
    """The driver refused or failed the action."""


class DeviceMonitor:
    """One device's monitor: a cache of catalogue counters refreshed from its driver.

    Queries (`get`, `snapshot`, `counters`) read the cache only and never touch the driver.
    """

    SPEC = ""  # device type the spec monitors
    SOURCE = ""  # spec file it was compiled from
    COUNTERS: tuple[str, ...] = ()  # counters the spec fills
    ERROR_STATUS: Mapping[int, str] = {}  # driver error code -> driver status
    DISCOVERY: dict | None = None  # which devices of a machine the spec applies to (fleet.hosts.local)
    HEALTH: Mapping[str, float] = {}  # health limits the spec changes (fleet.asicmon.limits)
    ACTIONS: tuple[str, ...] = ()  # control actions the spec declares (CONTROL_ACTIONS)
    EVENTS: Mapping[str, Any] | None = None  # {"catalogue": ..., "sources": (...)} of ``events``
    DIAGNOSTIC = ""  # the command of the spec's ``diagnose`` statement (the repair ladder's check)

    def __init__(
        self,
        *,
        index: int = 0,
        files: Any = None,
        lib: Any = None,
        serial: str = "",
        interval: float = 10.0,
        timeout: float = DEFAULT_TIMEOUT_S,
    ) -> None:
        """``index`` is the device's position among its driver's devices; ``files`` (anything
        with ``read_text(relative_path)``) or ``lib`` (a library object) is how the driver is
        reached."""
        self.files = files
        self.lib = lib
        self.index = index
        self.serial = serial
        self.interval = interval
        self.timeout = timeout
        self._cache: dict[str, Any] = dict(_BLANK)
        self._prev: dict[Any, tuple[Any, float]] = {}
        self._opened = False
        self._pending: Future | None = None  # a probe left running in the background
        self._pending_now = 0.0  # the time it probes for: its answer is as old as that
        self._refresh_lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.refreshes = 0
        self.events = EventChannel()  # the device's error events between two polls
        self.bus_address = ""  # where its driver's error lines name it (set by who builds it)

    # -- queries: cache only ---------------------------------------------------------------
    def get(self, name: str) -> Any:
        try:
            return self._cache[name]
        except KeyError:
            raise KeyError(f"unknown counter {name!r}; see fleet.asicmon.CATALOGUE") from None

    def snapshot(self) -> dict[str, Any]:
        """A copy of the latest snapshot: every catalogue counter, None where unknown."""
        return dict(self._cache)

    def counters(self) -> dict[str, CounterDef]:
        """Catalogue entries of the counters this device's spec fills, plus the runtime's."""
        return {n: CATALOGUE[n] for n in (*self.COUNTERS, *RUNTIME_COUNTERS)}

    @staticmethod
    def describe(name: str) -> CounterDef:
        return CATALOGUE[name]

    # -- refresh -------------------------------------------------------------------------
    def refresh(self, now: float | None = None, timeout: float | None = None) -> dict[str, Any]:
        """Probes the driver and publishes a new snapshot. With ``timeout``, the probe runs
        on a worker thread and a probe that does not finish in time marks the device hung."""
        pending = self.begin_refresh(now, inline=timeout is None)
        return self.finish_refresh(
            pending, None if timeout is None else time.perf_counter() + timeout
        )

    @property
    def known_hung(self) -> bool:
        return self._cache["driver_status"] == "hung"

    def begin_refresh(self, now: float | None = None, inline: bool = False) -> PendingRefresh:
        """Starts a probe. A device known hung is probed in the background: nobody waits
        for it, and what its last background probe found is published instead."""
        now = time.time() if now is None else now
        started = time.perf_counter()
        if self._pending is not None:
            if not self._pending.done():  # the last probe is still stuck in the driver
                return PendingRefresh(
                    now,
                    started,
                    result=(None, "hung", "driver still blocked in an earlier probe", 0.0),
                )
            finished, self._pending = self._pending, None
            if self.known_hung and not inline:
                result, probed_at = finished.result(), self._pending_now
                if result[1] == "hung":  # still not answering: keep probing in the background
                    self._pending, self._pending_now = _EXECUTOR.submit(self._collect, now), now
                # Published with the time it probed, not now: a "hung" from before a reboot
                # that another process did meanwhile must not read as hung after it.
                return PendingRefresh(probed_at, started, result=result)
        if inline:
            return PendingRefresh(now, started, result=self._collect(now))
        pending = PendingRefresh(now, started, wait=not self.known_hung)
        pending.future = _EXECUTOR.submit(self._collect_pending, pending)
        return pending

    def _collect_pending(self, pending: PendingRefresh) -> tuple:
        pending.began = time.perf_counter()
        return self._collect(pending.now)

    def finish_refresh(self, pending: PendingRefresh, deadline: float | None) -> dict[str, Any]:
        result = pending.result
        if result is None:
            try:
                result = _await(pending, deadline)
            except FutureTimeout:
                self._pending, self._pending_now = pending.future, pending.now
                result = (
                    None,
                    "hung",
                    f"probe exceeded its {self.timeout:g} s time budget"
                    if pending.wait
                    else "hung earlier; probing in the background until it answers",
                    time.perf_counter() - pending.started,
                )
        self._publish(pending.now, result)
        return self._cache

    def _collect(self, now: float) -> tuple[dict | None, str, str | None, float]:
        """Runs the spec's probe; returns (values, driver status, error message, seconds)."""
        with self._refresh_lock:
            started = time.perf_counter()
            try:
                if not self._opened:
                    self._open()
                    self._opened = True
                return self._probe(now), "ok", None, time.perf_counter() - started
            except Exception as exc:  # any driver failure becomes a driver status
                self._opened = False
                return (
                    None,
                    self.classify(exc),
                    f"{type(exc).__name__}: {exc}",
                    time.perf_counter() - started,
                )

    def _publish(self, now: float, result: tuple) -> None:
        values, status, error, duration = result
        snap = dict(_BLANK)
        if values is not None:
            snap.update(values)
        else:
            self._prev.clear()  # rates restart after an outage
            old = self._cache
            for name in _KEEP_ON_ERROR:
                snap[name] = old[name]
        snap["driver_status"] = status
        snap["driver_error"] = error
        snap["sample_ts"] = now
        snap["probe_duration_s"] = duration
        self._cache = snap  # the one publication point
        self.refreshes += 1

    def classify(self, exc: BaseException) -> str:
        """Maps a driver error to a driver status using the spec's ``error ... means``."""
        code = getattr(exc, "status", None)
        if code is None:
            code = exc.errno if isinstance(exc, OSError) else getattr(exc, "value", None)
        if code is not None and code in self.ERROR_STATUS:
            return self.ERROR_STATUS[code]
        if isinstance(exc, TimeoutError):
            return "hung"
        return "error"

    # -- periodic refresh ------------------------------------------------------------------
    def start(self, interval: float | None = None) -> None:
        """Refreshes every ``interval`` seconds on a daemon thread until `stop`."""
        if interval is not None:
            self.interval = interval
        if self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(
            target=self._run, name=f"asicmon-{self.serial or self.SPEC}", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.timeout + 1)
            self._thread = None

    def _run(self) -> None:
        while True:
            self.refresh(timeout=self.timeout)
            if self._stop.wait(self.interval):
                return

    # -- control actions -------------------------------------------------------------------
    def control(self, action: str) -> None:
        """Carries out a control action the spec declares (``action reboot = …``). Raises
        `ControlNotDeclared` when it declares none, `ControlFailed` when the driver refuses."""
        if action not in self.ACTIONS:
            raise ControlNotDeclared(f"the {self.SPEC} spec declares no {action!r} action")
        method = getattr(self, f"_action_{action}")
        try:
            result = method()
        except AttributeError:  # never opened in this process: open it (its handle) first
            self._open()
            result = method()
        if isinstance(result, int) and not isinstance(result, bool) and result != 0:
            raise ControlFailed(f"{action} of {self.serial or self.index} failed with status {result}")

    # -- error events ----------------------------------------------------------------------
    @property
    def catalogue_name(self) -> str | None:
        return (self.EVENTS or {}).get("catalogue")

    def drain_events(self) -> list[ErrorEvent]:
        """The device's error events since the last drain, merged and classified."""
        return self.events.drain()

    # -- generated code fills these ------------------------------------------------------
    def _open(self) -> None:
        pass

    def _probe(self, now: float) -> dict[str, Any]:
        raise NotImplementedError

    # -- history of monotonic counters, so another process can carry on the rates ---------
    def export_history(self) -> list[list]:
        """The previous readings behind `rate` and `delta`, as JSON-ready rows."""
        return [
            [list(slot) if isinstance(slot, tuple) else slot, value, t]
            for slot, (value, t) in self._prev.items()
        ]

    def import_history(self, rows: Iterable[list]) -> None:
        self._prev = {
            (tuple(slot) if isinstance(slot, list) else slot): (value, t) for slot, value, t in rows
        }

    # -- arithmetic the generated code uses -----------------------------------------------
    def _rate(self, slot: Any, value: Any, now: float, wrap: int | None = None) -> float | None:
        """Per-second rate of a monotonic counter since the last refresh; None at first."""
        step = self._step(slot, value, now, wrap)
        if step is None:
            return None
        increase, elapsed = step
        return increase / elapsed if elapsed > 0 else None

    def _delta(self, slot: Any, value: Any, now: float, wrap: int | None = None) -> float | None:
        """Increase of a monotonic counter since the last refresh; None at first."""
        step = self._step(slot, value, now, wrap)
        return None if step is None else step[0]

    def _step(
        self, slot: Any, value: Any, now: float, wrap: int | None
    ) -> tuple[Any, float] | None:
        """(increase, seconds) since the previous reading of ``slot``, which this one
        replaces; None at the first reading, or after a reset of a counter that cannot wrap."""
        prev = self._prev.get(slot)
        self._prev[slot] = (value, now)
        if prev is None or value is None or prev[0] is None:
            return None
        increase = value - prev[0]
        if increase < 0:
            if not wrap:
                return None  # the counter was reset
            increase += wrap
        return increase, now - prev[1]
