"""Driver-error figures: kernel-log lines parsed and deduplicated per second on one core, a
flood of a million lines turned into a handful of events, and the poll's cycle time with
and without the flood.

    python benchmarks/bench_driver_errors.py [--lines 1000000] [--cycles 2000]

The lines look like a real node's kernel log during an XID 95 storm (the shape operators
report: ~800,000 lines of which 29 distinct): /dev/kmsg records, 85 % XID 95 with 29
distinct details and changing pids, 5 % other Xids and SXids of the catalogue, 10 % other
drivers' lines. The poll is an emulated host of 8 devices polled through Asicmon; during
the flood the lines are appended to a file that a `KernelLogPump` (the agent's, in its child
process) follows, as the agent follows /dev/kmsg.
"""

import argparse
import os
import random
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from harness import load_average, median

UNITS = ["FBHUB", "SM (0x1)", "SM (0x2)", "SM (0x4)", "HSHUB", "L2", "LTC", "NVLINK", "PCIE", "MMU",
         "CE0", "CE1", "CE2", "CE3", "NVDEC0", "NVJPG0", "GSP", "PMU", "SEC2", "FSP", "XAL", "XTL",
         "HUB", "GPC", "TPC", "ROP", "ZCULL", "PES", "FECS"]  # 29 distinct details
OTHER_XIDS = [
    "NVRM: Xid (PCI:0000:{bus}:00): 13, pid={pid}, name=python3, Graphics SM Warp Exception on (GPC 1, TPC 0, SM 1): Out Of Range Address",
    "NVRM: Xid (PCI:0000:{bus}:00): 31, pid={pid}, name=python3, Ch 00000010, intr 00000000. MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_0 faulted @ 0x7f4d_20000000. Fault is of type FAULT_PDE ACCESS_TYPE_VIRT_READ",
    "NVRM: Xid (PCI:0000:{bus}:00): 63, pid={pid}, name=python3, Row Remapper: New row marked for remapping, reset gpu to activate.",
    "NVRM: Xid (PCI:0000:{bus}:00): 74, pid={pid}, name=python3, NVLink: fatal error detected on link 3(0x10000, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0)",
    "nvidia-nvswitch2: SXid (PCI:0000:c1:00.0): 12028, Non-fatal, Link 14 egress non-posted PRIV error (First)",
]
NOISE = [
    "usb 1-1.3: new high-speed USB device number {pid} using ehci-pci",
    "mlx5_core 0000:{bus}:00.0: mlx5_fw_tracer_handle_traces:735:(pid {pid}): FW tracer event",
    "EXT4-fs (nvme0n1p2): re-mounted. Opts: errors=remount-ro",
    "audit: type=1400 audit({pid}.123:42): apparmor=\"DENIED\" operation=\"open\"",
]


def flood(n: int, seed: int = 7, span_s: float = 60.0) -> list[str]:
    rnd = random.Random(seed)
    lines = []
    for i in range(n):
        usec = int(5_000_000_000 + i * span_s * 1e6 / n)
        r = rnd.random()
        pid = rnd.randrange(1000, 60000)
        bus = "3b"
        if r < 0.85:
            unit = UNITS[rnd.randrange(len(UNITS))]
            msg = f"NVRM: Xid (PCI:0000:{bus}:00): 95, pid={pid}, name=python3, Uncontained: {unit}. RST: Yes, D-RST: No"
        elif r < 0.90:
            msg = OTHER_XIDS[rnd.randrange(len(OTHER_XIDS))].format(bus=bus, pid=pid)
        else:
            msg = NOISE[rnd.randrange(len(NOISE))].format(bus="5d", pid=pid)
        lines.append(f"3,{i},{usec},-;{msg}\n")
    return lines


def parse_rate(lines: list[str]) -> None:
    from fleet.asicmon.errors import KernelLogReader

    best = 0.0
    for _ in range(3):
        reader = KernelLogReader(boot_time=1_764_000_000.0)
        started = time.perf_counter()
        for at in range(0, len(lines), 20_000):  # the pump's chunks
            reader.feed(lines[at:at + 20_000])
        seconds = time.perf_counter() - started
        events = reader.take()
        best = max(best, len(lines) / seconds)
    distinct = len({e.key for e in events})
    print(f"parse + dedup, one core:   {best:12,.0f} lines/s  ({len(lines):,} lines in {len(lines) / best:.2f} s)")
    print(f"  {reader.matched:,} driver-error lines -> {len(events)} events ({distinct} distinct, "
          f"buckets of {reader.bucket_s:g} s), {reader.malformed} malformed")


def poll_times(host, polls: int, interval: float) -> list[tuple[float, float]]:
    """(wall, CPU) seconds of each poll. CPU is this process's (the poll thread and its probe
    threads; the follower is another process): what the poll itself cost, where the wall
    time also has the waits of a machine other work keeps busy."""
    out = []
    for _ in range(polls):
        started, cpu = time.perf_counter(), time.process_time()
        host.poll()
        out.append((time.perf_counter() - started, time.process_time() - cpu))
        time.sleep(max(0.0, interval - out[-1][0]))
    return out


def pct(values: list, q: float, which: int = 0) -> float:
    values = sorted(v[which] if isinstance(v, tuple) else v for v in values)
    return values[min(len(values) - 1, int(len(values) * q))] * 1000


def _emulated_host():
    from emulator import FleetConfig
    from fleet.hosts.emulated_monitors import HostMonitor

    state = tempfile.mkdtemp()  # the emulator's state on disk, as the workers keep it
    host = HostMonitor.open(FleetConfig(seed=5, hosts=1, devices_per_host=8, types=("gpu",)), "host-00", state)
    host.monitors()[0].bus_address = "0000:3b:00"  # the flooding GPU
    host.router.add("0000:3b:00", host.monitors()[0].events, host.serials[0], "nvidia_xid")
    for _ in range(5):
        host.poll()  # warm
    return host


def _flood_block(host, pump, path: Path, source: Path, target: int, interval: float, stop_at: float) -> list[float]:
    """One flood appended to the followed file; the polls while the pump is behind it."""
    # Another process writes the flood, in a session of its own: the kernel would write it,
    # neither under this process's GIL nor in its scheduling group (its autogroup).
    writer = subprocess.Popen(["sh", "-c", f"cat '{source}' >> '{path}'"], start_new_session=True)
    loud: list[float] = []
    while pump.stats.lines < target and time.perf_counter() < stop_at:
        loud += poll_times(host, 1, interval)
    writer.wait()
    return loud


def _how_the_follower_runs(pid: int) -> str:

    policy = {os.SCHED_IDLE: "SCHED_IDLE", os.SCHED_OTHER: f"nice {os.getpriority(os.PRIO_PROCESS, pid)}"}
    try:
        group = Path(f"/proc/{pid}/autogroup").read_text().split()
        own = os.getsid(pid) != os.getsid(0)
        group_text = f"{'an autogroup of its own' if own else 'the autogroup of the poll'}, nice {group[-1]}"
    except OSError:
        group_text = "no autogroup"
    return f"{policy.get(os.sched_getscheduler(pid), '?')}, {group_text}"


def interleaved(lines: list[str], cycles: int, interval: float, limit_s: float,
                duties: tuple[float, ...]) -> tuple[list, dict]:
    """Quiet and flood blocks in turn (A/B, so that the machine's load drifting over the run
    weighs on all alike), until each side has ``cycles`` polls: a flood block is the polls
    while a pump's child works through one flood of ``lines``, the quiet block after it as
    many polls with every pump caught up and idle. One pump per duty takes the floods in turn
    (1: full speed; the agent's default is AGENT_KERNEL_LOG_DUTY)."""
    from fleet.asicmon.errors.pump import KernelLogPump

    host = _emulated_host()
    quiet: list[float] = []
    loud: dict[float, list] = {duty: [] for duty in duties}
    floods: dict[float, list[float]] = {duty: [] for duty in duties}
    loads = []
    stop_at = time.perf_counter() + limit_s
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / "flood.log"
        source.write_text("".join(lines))
        pumps = {}
        for duty in loud:
            path = Path(tmp) / f"kern-{duty}.log"
            path.write_text("")
            pumps[duty] = (KernelLogPump(str(path), host.router, bucket_s=300.0, from_start=True, duty=duty), path)
            pumps[duty][0].start()
        time.sleep(2.0)  # the child processes start
        how = {duty: _how_the_follower_runs(pump.child.pid) for duty, (pump, _) in pumps.items()}
        while (min(len(v) for v in loud.values()) < cycles or len(quiet) < cycles) and time.perf_counter() < stop_at:
            for duty, (pump, path) in pumps.items():
                started = time.perf_counter()
                block = _flood_block(host, pump, path, source, pump.stats.lines + len(lines), interval, stop_at)
                floods[duty].append(time.perf_counter() - started)
                loud[duty] += block
                time.sleep(1.0)  # the last flush routed: the pump is idle again
                quiet += poll_times(host, max(len(block), 20), interval)
                loads.append(os.getloadavg()[0])
        for pump, _ in pumps.values():
            pump.stop()
    stored = sum(len(v) for v in host.drain_events().values())
    for duty, (pump, _) in pumps.items():
        print(f"duty {duty:g}: {len(floods[duty])} floods of {len(lines):,} lines, each followed in "
              f"{median(floods[duty]):.1f} s (median) by the pump's child process ({how[duty]}): "
              f"{pump.stats.matched:,} driver-error lines -> {pump.stats.events} events routed")
    print(f"  {stored} events left to store from all the floods")
    print(f"load average (1 min) over the A/B blocks: median {median(loads):.2f}, "
          f"min {min(loads):.2f}, max {max(loads):.2f} ({os.cpu_count()} cores)")
    return quiet, loud


def report(quiet: list, loud: list, label: str) -> None:
    for which, kind in ((0, "wall"), (1, "CPU ")):
        print(f"poll of 8 devices, {kind} time, without flood:       p50 {pct(quiet, .5, which):6.2f} ms  "
              f"p99 {pct(quiet, .99, which):6.2f} ms  ({len(quiet)} polls)")
        print(f"poll of 8 devices, {kind} time, during flood, {label}: p50 {pct(loud, .5, which):6.2f} ms  "
              f"p99 {pct(loud, .99, which):6.2f} ms  ({len(loud)} polls)")
        q = [v[which] for v in quiet]
        ld = [v[which] for v in loud]
        half_q, half_l = len(q) // 2, len(ld) // 2
        print(f"  p99 by half of the run: without {pct(q[:half_q], .99):.2f} / {pct(q[half_q:], .99):.2f} ms, "
              f"during {pct(ld[:half_l], .99):.2f} / {pct(ld[half_l:], .99):.2f} ms")
        print(f"  {kind} p99 during / without: {pct(ld, .99) / pct(q, .99):.3f} "
              f"({(pct(ld, .99) / pct(q, .99) - 1) * 100:+.1f} %); mean {statistics.mean(ld) / statistics.mean(q):.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lines", type=int, default=1_000_000)
    parser.add_argument("--cycles", type=int, default=2000, help="polls on each side (a stable p99 needs thousands)")
    parser.add_argument("--interval", type=float, default=0.05, help="seconds between polls")
    parser.add_argument("--limit-s", type=float, default=480.0, help="stop the A/B blocks after this long")
    parser.add_argument("--duties", default="1,0.5", help="the followers' duties, one pump each, floods in turn")
    args = parser.parse_args()
    lines = flood(args.lines)
    print(f"load average at the start: {load_average()} ({os.cpu_count()} cores)")
    parse_rate(lines)
    duties = tuple(float(d) for d in args.duties.split(","))
    quiet, loud = interleaved(lines, args.cycles, args.interval, args.limit_s, duties)
    for duty, polls in loud.items():
        report(quiet, polls, f"duty {duty:g}")


if __name__ == "__main__":
    main()
