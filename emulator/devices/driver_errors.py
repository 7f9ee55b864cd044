"""Driver errors of the emulated devices: realistic cascades written to a kernel log.

A driver-error fault is injected like any other (``python -m emulator inject SERIAL xid_79``)
and plays out as a cascade: lines in the host's kernel log at the times a real driver would
write them (NVIDIA's ``NVRM: Xid`` format for GPU-like devices, amdgpu's RAS lines for the
others), and effects on the device (it stops answering, its ECC counter moves). Each fault
needs a rung of the repair ladder to go away:

* ``restart_application`` -- the workload restarts (`restart_workload`): application faults;
* ``reset_device`` -- a device reset (its reboot);
* ``reboot_host`` -- the whole host restarts (`EmulatedHost.reboot_host`);
* ``inspect_hardware`` -- nothing in software cures it (a persistent fault).

`diagnose` is the device's short self-test: it fails while a fault is still there.
A GPU has a few spare memory rows: each ``xid_48`` uses one (48 then 63); past the spares
it fails its remap (48 then 64) and becomes a hardware fault.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

__all__ = [
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

RUNGS = ("ignore", "restart_application", "reset_device", "reboot_host", "inspect_hardware")
SPARE_ROWS = 2  # spare rows an emulated GPU can remap to
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


CASCADES: dict[str, Cascade] = {
    "xid_79": Cascade("nvidia", "reboot_host", (Step(0, "79", "GPU has fallen off the bus.", "hang"),)),
    "xid_48": Cascade("nvidia", "reset_device", (
        Step(0, "48", "An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at partition 1, subpartition 0."),
        Step(1, "63", "Row Remapper: New row marked for remapping, reset gpu to activate."),
    )),
    "xid_94": Cascade("nvidia", "restart_application", (Step(0, "94", "Contained: SM (0x1). RST: No, D-RST: No"),)),
    "xid_95": Cascade("nvidia", "reset_device", (Step(0, "95", "Uncontained: FBHUB. RST: Yes, D-RST: No"),), repeat=200),
    "xid_119": Cascade("nvidia", "reset_device", (
        Step(0, "119", "Timeout after 6s of waiting for RPC response from GPU0 GSP! Expected function 76 (GSP_RM_CONTROL) (0x20800a4c 0x4)."),
        Step(6, "119", "Timeout after 6s of waiting for RPC response from GPU0 GSP! Expected function 10 (FREE) (0x0 0x0).", "hang"),
    )),
    "xid_120": Cascade("nvidia", "reset_device", (Step(0, "120", "GSP task exception: Task ID 0x2, PC 0x4bd0, Stack 0x0"),)),
    "xid_74": Cascade("nvidia", "reset_device", (
        Step(0, "74", "NVLink: fatal error detected on link 3(0x10000, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0)"),
    )),
    "xid_13": Cascade("nvidia", "restart_application", (
        Step(0, "13", "Graphics SM Warp Exception on (GPC 1, TPC 0, SM 1): Out Of Range Address"),
        Step(0, "13", "Graphics Exception: ESR 0x514730=0x201000e 0x514734=0x24 0x514728=0x4c1eb72 0x51472c=0x1174"),
    )),
    "xid_31": Cascade("nvidia", "restart_application", (
        Step(0, "31", "Ch 00000010, intr 00000000. MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_0 faulted @ 0x7f4d_20000000. Fault is of type FAULT_PDE ACCESS_TYPE_VIRT_READ"),
    )),
    "xid_43": Cascade("nvidia", "ignore", (Step(0, "43", "Ch 00000008"),)),
    "amd_umc_ue": Cascade("amd", "reset_device", (
        Step(0, "umc.ue", "amdgpu: 1 uncorrectable hardware errors detected in umc block"),
        Step(1, "bad_page", "amdgpu: Saved 1 bad pages to the RAS table"),
    )),
    "amd_xgmi_ue": Cascade("amd", "reset_device", (Step(0, "xgmi_wafl.ue", "amdgpu: 1 uncorrectable hardware errors detected in xgmi_wafl block"),)),
    "amd_ring_timeout": Cascade("amd", "restart_application", (
        Step(0, "ring_timeout", "amdgpu: ring gfx_0.0.0 timeout, signaled seq=48127, emitted seq=48129"),
    )),
    "amd_umc_ce": Cascade("amd", "ignore", (Step(0, "umc.ce", "amdgpu: 3 correctable hardware errors detected in umc block"),)),
}
DRIVER_FAULTS = tuple(CASCADES)


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
    if fault == "xid_48":
        used = state.faults.get("rows_remapped", {}).get("count", 0) + 1
        state.faults["rows_remapped"] = {"since": state.t, "persistent": True, "count": used, "needs": "ignore"}
        if used > SPARE_ROWS:  # no spare row left: the remap fails, the board is faulty
            cascade = Cascade("nvidia", "inspect_hardware", (
                cascade.steps[0], Step(1, "64", "Row Remapper: Failed to mark row for remapping, no spare rows left in the bank."),
            ))
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
