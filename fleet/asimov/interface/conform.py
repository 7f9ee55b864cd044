"""``python -m fleet.asimov conform SPEC --device sim``: the conformance kit. It drives one
device through every counter and command its spec declares and says, check by check, what
holds:

* **readable** -- each declared counter has a value of its kind (a number, a word of its
  state, text) once the device has been read twice (a real device may have none for a
  counter its spec reads as optional);
* **range** -- each number is where its unit puts it (`RANGES`: a temperature read in mC and
  published as °C, a power in mW published as W, lands far outside);
* **monotonic** -- a ``counter`` never goes back between refreshes (a wrap at 2**32 or 2**64
  excepted);
* **cache** -- reading the snapshot never touches the driver, a refresh does, the snapshot
  holds still between refreshes and carries the refresh's time;
* **commands** -- ``diagnose`` passes on a healthy device; ``reboot`` is answered, its effect
  is seen (the device boots again, or its driver says it is away) and the device comes back;
* **events** -- a driver error the double can play is read and classified by the spec's
  catalogue (a known code, an action from the fixed vocabulary).

The device is named by ``--device``: ``sim`` (the spec's generated simulator,
`emulator.conformance`), ``files=FOLDER`` or ``nvml=INDEX`` (a real device of this host,
`fleet.hosts.conformance`; its commands run only with ``,commands``), or
``MODULE:FUNCTION[=ARGUMENT]``, a factory of one's own taking the spec's path and the
argument. Factories are found by name, so this module, below the emulator and the hosts in
the layers, imports none of them. The device gives a
``monitor`` (a `DeviceMonitor` of the spec) and ``advance(now)``; ``boots()``, ``diagnose()``,
``driver_error()``, ``kernel_lines()`` and ``close()`` where it can.
"""

from __future__ import annotations

import importlib
import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from fleet.asicmon.catalogue import CATALOGUE
from fleet.asicmon.errors.catalogue import ACTIONS, classify
from fleet.asicmon.errors.kernel_log import KernelLogReader
from fleet.asicmon.mappings import ucum

__all__ = ["CHECKS", "DEVICES", "RANGES", "Check", "Report", "conform", "open_device", "run", "table", "to_json"]

DEVICES = {
    "sim": "emulator.conformance:simulated_device",  # the spec's generated simulator
    "files": "fleet.hosts.conformance:files_device",  # files=FOLDER[,commands]: an hwmon or sysfs folder
    "nvml": "fleet.hosts.conformance:nvml_device",  # nvml=INDEX[,commands]: an NVIDIA GPU of this host
}
T0 = 1_700_000_000.0
STEP_S = 10.0
SAMPLES = 6
# Where a counter's value must lie, in its catalogue unit (a counter not here: >= 0 if a number).
RANGES: dict[str, tuple[float, float]] = {
    "device_utilization": (0, 1), "core_utilization": (0, 1), "memory_utilization": (0, 1),
    "core_count": (1, 1e5),
    "temperature_c": (-40, 150), "temperature_limit_c": (0, 150),
    "power_w": (0, 5000), "power_limit_w": (1, 5000),
    "clock_mhz": (1, 10_000), "clock_max_mhz": (1, 10_000),
    "memory_used_bytes": (0, 2**50), "memory_free_bytes": (0, 2**50), "memory_total_bytes": (2**20, 2**50),
    "pcie_link_gen": (1, 7), "pcie_link_width": (1, 32),
    "dma_to_device_bytes_per_s": (0, 1e13), "dma_from_device_bytes_per_s": (0, 1e13),
}
_WRAPS = (2**32, 2**64)
# Every check of the report, in words (docs/spec/interface.md publishes them).
CHECKS = {
    "readable": "the counter has a value of its kind: a number, a list per core, a word of its state, text",
    "range": "every value read lies in the range of its unit (the table below; other numbers: >= 0)",
    "monotonic": "a counter never goes back between refreshes, but for a wrap at 2^32 or 2^64",
    "consistent": "used memory <= total memory, clock <= maximum clock",
    "served from the cache": "reading the snapshot and every counter makes no driver call",
    "holds between refreshes": "two reads of the snapshot with no refresh between are equal",
    "reads the driver": "a refresh calls the driver",
    "carries its time": "sample_ts is the time of the refresh",
    "declared": "the spec declares no command (its devices go to the repair path)",
    "not run": "a real device's commands run only when asked for (--device ...,commands)",
    "passes on a healthy device": "diagnose passes on the device before anything is done to it",
    "answered": "the command returns without an error",
    "effect seen": "after reboot the device boots again, or its driver says it is away",
    "device back": "the device answers ok again after the reboot time",
    "classified": "the device can play no driver error (nothing to classify)",
    "read and classified": "a driver error the device plays is read from its log and its catalogue knows every "
                           "code, with an action of the fixed vocabulary",
}


@dataclass
class Check:
    area: str  # counter, cache, command, events
    subject: str  # the counter or command
    check: str
    passed: bool
    detail: str = ""


@dataclass
class Report:
    spec: str
    device: str
    checks: list[Check] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.checks)

    def failures(self) -> list[Check]:
        return [c for c in self.checks if not c.passed]

    def add(self, area: str, subject: str, check: str, passed: bool, detail: str = "") -> None:
        self.checks.append(Check(area, subject, check, bool(passed), detail))

    def as_dict(self) -> dict:
        return {"spec": self.spec, "device": self.device, "passed": self.passed,
                "failed": len(self.failures()), "checks": [asdict(c) for c in self.checks]}


class _Counting:
    """A driver (``lib`` or ``files``) that counts the calls made through it."""

    def __init__(self, target: Any) -> None:
        self._target, self.calls = target, 0

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._target, name)
        if not callable(value) or isinstance(value, type):  # a constant, an exception class
            return value

        def call(*args, **kwargs):
            self.calls += 1
            return value(*args, **kwargs)

        return call


def open_device(spec: str | Path, device: str = "sim") -> Any:
    """The device under test: ``NAME[=ARGUMENT]`` of `DEVICES`, or ``MODULE:FUNCTION[=ARGUMENT]``."""
    name, _, argument = device.partition("=")
    module, sep, function = DEVICES.get(name, name).partition(":")
    if not sep:
        raise ValueError(f"--device {device!r}: expected {', '.join(DEVICES)} or MODULE:FUNCTION[=ARGUMENT]")
    return getattr(importlib.import_module(module), function)(Path(spec), argument)


def conform(spec: str | Path, device: str = "sim") -> Report:
    dut = open_device(spec, device)
    try:
        return run(dut, str(spec), device)
    finally:
        if hasattr(dut, "close"):
            dut.close()


def run(dut: Any, spec: str, device: str = "sim") -> Report:
    report = Report(spec, device)
    monitor = dut.monitor
    drivers = [d for d in ("lib", "files") if getattr(monitor, d, None) is not None]
    for name in drivers:
        setattr(monitor, name, _Counting(getattr(monitor, name)))
    now, snaps = T0, []
    for _ in range(SAMPLES):
        dut.advance(now)
        snaps.append(dict(monitor.refresh(now)))
        now += STEP_S
    _counters(report, monitor.COUNTERS, snaps, getattr(dut, "may_lack_counters", False))
    _cache(report, dut, monitor, drivers, now)
    now += STEP_S
    now = _commands(report, dut, monitor, now)
    _events(report, dut, monitor, now)
    return report


def _counters(report: Report, names: tuple[str, ...], snaps: list[dict], lenient: bool = False) -> None:
    """``lenient``: a counter with no value passes (a real device may lack an optional read)."""
    status = [s["driver_status"] for s in snaps]
    report.add("counter", "driver_status", "readable", all(s == "ok" for s in status),
               "" if all(s == "ok" for s in status) else f"driver status {status}: {snaps[-1]['driver_error']}")
    if "ok" not in status:
        return  # the driver never answered: no counter can be judged
    for name in names:
        c = CATALOGUE[name]
        values = [s[name] for s in snaps[1:]]
        last = values[-1]
        if last is None and lenient:
            report.add("counter", name, "readable", True, "no value: this device does not tell")
            continue
        problem = _kind_problem(c, last)
        report.add("counter", name, "readable", problem is None, problem or _show(last, c.unit))
        if problem is not None or c.kind in ("info", "state"):
            continue
        out = [v for v in values if _out_of_range(name, c.kind, v)]
        low, high = RANGES.get(name, (0, math.inf))
        report.add("counter", name, "range", not out,
                   f"{_show(out[0], c.unit)} outside {low:.4g}..{high:.4g} {ucum(c.unit)}" if out else "")
        if c.kind == "counter":
            back = [(a, b) for a, b in zip(values, values[1:], strict=False) if _went_back(a, b)]
            report.add("counter", name, "monotonic", not back,
                       f"went back from {back[0][0]} to {back[0][1]}" if back else f"{values[0]} .. {values[-1]}")
    _consistency(report, snaps[-1])


def _kind_problem(c, value) -> str | None:
    if value is None:
        return "no value"
    if c.per_core:
        if not isinstance(value, list) or not value or not all(_is_number(v) for v in value):
            return f"expected a list of numbers per core, got {value!r}"
        return None
    if c.kind == "state":
        return None if value in c.values else f"{value!r} is not one of {', '.join(c.values)}"
    if c.kind == "info":
        return None if isinstance(value, str) and value else f"expected text, got {value!r}"
    return None if _is_number(value) else f"expected a number, got {value!r}"


def _is_number(v) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def _out_of_range(name: str, kind: str, value) -> bool:
    low, high = RANGES.get(name, (0, math.inf))
    values = value if isinstance(value, list) else [value]
    return any(v is not None and not low <= v <= high for v in values)


def _went_back(a, b) -> bool:
    if a is None or b is None or b >= a:
        return False
    return not any(a < w <= a * 1.5 + 2**20 and b < w / 100 for w in _WRAPS)  # a wrap at the width


def _show(value, unit: str) -> str:
    if isinstance(value, float):
        value = f"{value:.4g}"
    return f"{value} {ucum(unit)}" if unit != "1" else str(value)


def _consistency(report: Report, snap: dict) -> None:
    pairs = [("memory_used_bytes", "memory_total_bytes"), ("clock_mhz", "clock_max_mhz"),
             ("temperature_c", None)]
    for low, high in pairs:
        if high and _is_number(snap.get(low)) and _is_number(snap.get(high)):
            ok = snap[low] <= snap[high] * 1.01
            report.add("counter", f"{low} <= {high}", "consistent", ok, "" if ok else f"{snap[low]} > {snap[high]}")


def _cache(report: Report, dut, monitor, drivers: list[str], now: float) -> None:
    counting = [getattr(monitor, d) for d in drivers]
    before = sum(d.calls for d in counting)
    first = monitor.snapshot()
    for name in CATALOGUE:
        monitor.get(name)
    second = monitor.snapshot()
    reads = sum(d.calls for d in counting) - before
    report.add("cache", "snapshot", "served from the cache", reads == 0,
               f"{reads} driver call(s) while reading the snapshot" if reads else "no driver call")
    report.add("cache", "snapshot", "holds between refreshes", first == second)
    dut.advance(now)
    monitor.refresh(now)
    probed = sum(d.calls for d in counting) - before
    report.add("cache", "refresh", "reads the driver", probed > 0 or not counting, f"{probed} driver call(s)")
    ts = monitor.get("sample_ts")
    report.add("cache", "refresh", "carries its time", ts == now, f"sample_ts {ts}, refreshed at {now}")


def _commands(report: Report, dut, monitor, now: float) -> float:
    declared = tuple(monitor.ACTIONS) + (("diagnose",) if monitor.DIAGNOSTIC else ())
    if not declared:
        report.add("command", "-", "declared", True, "no commands: its devices go to the repair path")
    if declared and not getattr(dut, "commands_allowed", True):
        for name in declared:
            report.add("command", name, "not run", True, "a real device: add ,commands to --device to run it")
        return now
    if monitor.DIAGNOSTIC:
        result = dut.diagnose() if hasattr(dut, "diagnose") else None
        report.add("command", "diagnose", "passes on a healthy device", result is None or result[0],
                   "not run (the device cannot)" if result is None else result[1])
    if "reboot" in monitor.ACTIONS:
        boots = dut.boots() if hasattr(dut, "boots") else None
        try:
            monitor.control("reboot")
            report.add("command", "reboot", "answered", True)
        except Exception as exc:  # any refusal is the finding
            report.add("command", "reboot", "answered", False, f"{type(exc).__name__}: {exc}")
        now += 1.0
        dut.advance(now)
        status = monitor.refresh(now)["driver_status"]
        after = dut.boots() if hasattr(dut, "boots") else None
        seen = status != "ok" or (boots is not None and after is not None and after > boots)
        detail = f"driver status {status}" + (f", boots {boots} -> {after}" if boots is not None else "")
        report.add("command", "reboot", "effect seen", seen, detail if seen else f"no effect: {detail}")
        reboot_s = getattr(dut, "reboot_s", 60.0)
        if hasattr(dut, "settle"):  # a real device: its reboot takes real time
            dut.settle(reboot_s)
        now += reboot_s + STEP_S
        dut.advance(now)
        back = monitor.refresh(now)["driver_status"]
        report.add("command", "reboot", "device back", back == "ok", f"driver status {back}")
    return now + STEP_S


def _events(report: Report, dut, monitor, now: float) -> None:
    name = monitor.catalogue_name
    if not name or not hasattr(dut, "driver_error"):
        return
    started = dut.driver_error()
    if started is None:
        report.add("events", name, "classified", True, "the device can play no driver error")
        return
    fault, needs = started
    dut.advance(now + STEP_S)
    reader = KernelLogReader(clock=lambda: now)
    reader.feed(dut.kernel_lines())
    events = [classify(e, name) for e in reader.take()]
    ok = bool(events) and all(e.known and e.action in ACTIONS for e in events)
    found = ", ".join(f"{e.code} -> {e.action}" if e.known else f"{e.code} unknown to {name}" for e in events)
    report.add("events", fault, "read and classified", ok, f"{found or 'no event read'} (the double says {needs})")


def table(report: Report) -> str:
    rows = [(c.area, c.subject, c.check, "pass" if c.passed else "FAIL", c.detail) for c in report.checks]
    head = ("area", "subject", "check", "result", "detail")
    widths = [max(len(str(r[i])) for r in [head, *rows]) for i in range(4)]
    lines = [f"conformance of {report.spec} on {report.device}"]
    for r in [head, *rows]:
        lines.append("  ".join(str(v).ljust(w) for v, w in zip(r[:4], widths, strict=False)) + "  " + r[4])
    failed = len(report.failures())
    lines.append(f"{len(report.checks) - failed} passed, {failed} failed")
    return "\n".join(lines)


def to_json(report: Report) -> str:
    return json.dumps(report.as_dict(), indent=2)
