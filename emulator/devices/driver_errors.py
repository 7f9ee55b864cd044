"""Driver errors of the emulated devices: realistic cascades written to a kernel log.

A driver-error fault is injected like any other (``python -m emulator inject SERIAL xid_79``)
and plays out as a cascade: lines in the host's kernel log at the times a real driver would
write them (NVIDIA's ``NVRM: Xid`` format, amdgpu's RAS lines), and effects on the device
(it stops answering). The cascades are the specs': their ``cascade`` lines
(`fleet.asimov.cascades`; gpu.asimov has NVIDIA's, inference.asimov amdgpu's, a spec in
``ASIMOV_SPEC_DIRS`` may add its own), and any emulated device can be given any of them.
This module is the runtime that plays them. Each fault needs a rung of the repair ladder to
go away:

* ``restart_application`` -- the workload restarts (`restart_workload`): application faults;
* ``reset_device`` -- a device reset (its reboot);
* ``reboot_host`` -- the whole host restarts (`EmulatedHost.reboot_host`);
* ``inspect_hardware`` -- nothing in software cures it (a persistent fault).

`diagnose` is the device's short self-test: it fails while a fault is still there.
A cascade with spare rows (a GPU's ``xid_48``: 48 then 63) uses one each time; past the
spares it plays its ``exhausted`` step instead (48 then 64) and becomes a hardware fault.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from emulator.devices.spec_types import cascades_from_specs
from emulator.perf.model import spec_dirs
from fleet.asimov.cascades import RUNGS

__all__ = [
    "CASCADES",
    "DRIVER_FAULTS",
    "RUNGS",
    "SPARE_ROWS",
    "bus_address",
    "workload_label",
    "diagnose",
    "due_lines",
    "inject",
    "restart_workload",
    "survives",
]

KMSG_KEEP = 5000  # kernel-log lines a host keeps before the oldest are overwritten
# Bus numbers of an eight-GPU server's slots, as `lspci` shows them on a typical HGX board.
_BUSES = (0x18, 0x2A, 0x3A, 0x5D, 0x9A, 0xAB, 0xBA, 0xDB)


@dataclass(frozen=True)
class Step:
    after_s: float  # seconds after the injection
    code: str
    text: str
    effect: str = ""  # "hang": the device stops answering from this step


@dataclass(frozen=True)
class Cascade:
    vendor: str  # "nvidia" (NVRM Xid lines) or "amd" (amdgpu lines)
    needs: str  # the rung that cures it
    steps: tuple[Step, ...]
    repeat: int = 1  # the first step's line, this many times (a flood)
    spare_rows: int | None = None  # uses it may have before it plays `exhausted`
    exhausted: Step | None = None

    @classmethod
    def from_spec(cls, c: dict) -> Cascade:
        """A cascade as `fleet.asimov.cascades` records a ``cascade`` line."""
        exhausted = Step(*c["exhausted"]) if c["exhausted"] else None
        return cls(c["vendor"], c["needs"], tuple(Step(*s) for s in c["steps"]), c["repeat"], c["spare_rows"], exhausted)


CASCADES: dict[str, Cascade] = {name: Cascade.from_spec(c) for name, c in cascades_from_specs(spec_dirs()).items()}
DRIVER_FAULTS = tuple(CASCADES)
SPARE_ROWS = next((c.spare_rows for c in CASCADES.values() if c.spare_rows is not None), 0)  # a GPU's spare rows


def workload_label(device_type: str, host: str, hosts_per_job: int = 2) -> str:
    """The workload an emulated device serves, as dcgm-exporter's job mapping would label
    it: the devices of one type on each pair of hosts run one job."""
    from emulator.workloads.graph import workload_for

    number = int(host.rsplit("-", 1)[-1]) if host.rsplit("-", 1)[-1].isdigit() else 0
    return f"{workload_for(device_type).name}-{number // hosts_per_job}"


def bus_address(index: int) -> str:
    """The PCI address (domain:bus:device) of the device in slot ``index``."""
    bus = _BUSES[index] if index < len(_BUSES) else (0x18 + 0x10 * index) % 0x100
    return f"0000:{bus:02x}:00"


def _line(cascade: Cascade, step: Step, address: str, host: str, t: float, pid: int) -> str:
    stamp = datetime.fromtimestamp(t, tz=UTC).isoformat(timespec="microseconds")
    if cascade.vendor == "amd":
        return f"{stamp} {host} kernel: amdgpu {address}.0: {step.text}"
    return f"{stamp} {host} kernel: NVRM: Xid (PCI:{address}): {step.code}, pid={pid}, name=python3, {step.text}"


def inject(state, fault: str, address: str, host: str, log: list, persistent: bool = False) -> None:
    """Starts ``fault``'s cascade on a device (its first lines now, the rest when due)."""
    cascade = CASCADES.get(fault)
    if cascade is None:
        raise ValueError(f"unknown driver fault {fault!r}; expected one of {', '.join(DRIVER_FAULTS)}")
    needs = cascade.needs
    if cascade.spare_rows is not None:
        used = state.faults.get("rows_remapped", {}).get("count", 0) + 1
        state.faults["rows_remapped"] = {"since": state.t, "persistent": True, "count": used, "needs": "ignore"}
        if used > cascade.spare_rows:  # no spare row left: the remap fails, the board is faulty
            cascade = Cascade(cascade.vendor, "inspect_hardware", (cascade.steps[0], cascade.exhausted))
            needs, persistent = "inspect_hardware", True
    pid = 4000 + int(state.t) % 50000
    pending = [[state.t + s.after_s, i] for i, s in enumerate(cascade.steps)]
    state.faults[fault] = {"since": state.t, "persistent": persistent or needs == "inspect_hardware",
                           "needs": needs, "pending": pending, "steps": [[s.code, s.text, s.effect] for s in cascade.steps],
                           "vendor": cascade.vendor, "pid": pid}
    for _ in range(cascade.repeat - 1):
        log.append(_line(cascade, cascade.steps[0], address, host, state.t, pid))
    due_lines(state, state.t, address, host, log)


def due_lines(state, now: float, address: str, host: str, log: list) -> None:
    """Writes the lines of the device's cascades that are due by ``now``, with their effects."""
    for fault in [f for f, v in state.faults.items() if v.get("pending")]:
        info = state.faults[fault]
        cascade = Cascade(info["vendor"], info["needs"], tuple(Step(0, c, t, e) for c, t, e in info["steps"]))
        still = []
        for due, i in info["pending"]:
            if due > now:
                still.append([due, i])
                continue
            step = cascade.steps[i]
            log.append(_line(cascade, step, address, host, due, info["pid"]))
            if step.effect == "hang":
                state.faults["hang"] = {"since": due, "persistent": info["persistent"]}
                info["hang"] = True
        info["pending"] = still
        if not still and info["needs"] == "ignore":
            del state.faults[fault]  # nothing to cure: the lines were all there was
    del log[:-KMSG_KEEP]


def survives(state, rung: str) -> dict:
    """The faults of the device that ``rung`` does not cure (kept across it)."""
    level = RUNGS.index(rung)
    kept = {}
    for name, info in state.faults.items():
        needs = info.get("needs")
        if info.get("persistent") or (needs is not None and RUNGS.index(needs) > level):
            kept[name] = info
            if info.get("hang"):
                kept["hang"] = state.faults.get("hang", {"since": state.t, "persistent": True})
    return kept


def restart_workload(state) -> list[str]:
    """The device's workload restarts: application faults are gone. Returns those cleared."""
    cleared = [n for n, v in state.faults.items() if v.get("needs") in ("ignore", "restart_application")
               and n != "rows_remapped" and not v.get("persistent")]
    for name in cleared:
        state.faults.pop(name)
    return cleared


def diagnose(state) -> tuple[bool, str]:
    """The device's short self-test: (passed, what it found)."""
    if state.rebooting_until is not None and state.t < state.rebooting_until:
        return False, "device still resetting"
    found = [n for n, v in state.faults.items() if n != "rows_remapped" and v.get("needs") != "ignore"]
    if found:
        return False, "diagnostic failed: " + ", ".join(sorted(found))
    return True, "diagnostic passed"
