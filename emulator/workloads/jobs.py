"""Distributed jobs on emulated devices: data- or tensor-parallel training over a chosen set
of devices, one rank per device, traced on every rank over the same window.

A job is a name, a parallelism and its ranks in order, each mapped to a device of the fleet
(:func:`select_devices` picks them by serial, by host or by type). Its steps
(``emulator.workloads.training``) run on every rank at the pace of that rank's device as it is *now*
(:func:`condition_of` reads the emulator's physics): a device that overheats has throttled
its clock and computes slower, a degraded PCIe link slows its copies and its share of every
collective between hosts, an ECC storm retries kernels, an older or regressed software version has slower
operators. A collective completes on every rank only when its last participant has arrived
and the data has gone round a ring whose slowest link (the device fabric inside one host, else a
device's PCIe link or the network between hosts) sets the pace -- so one slow device makes every other rank wait, as on
hardware. A device that hangs or reboots fails its rank; the others wait in their next
collective until the capture ends, and their traces are still complete.

:func:`run_job` plays a job over a window of emulated time as fast as it can (tests,
benchmarks); :func:`run_job_live` paces it in wall-clock time, as a capture does.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from emulator import noise
from emulator.config import DeviceSpec, FleetConfig, fleet_layout
from emulator.devices import physics
from emulator.devices.physics import DevicePhysics
from emulator.devices.zoo import device_type as lookup_type
from emulator.host import EmulatedHost
from emulator.workloads.graph import profile_for
from emulator.workloads.job_ranks import RankRecorder
from emulator.workloads.tracing import MAX_EVENTS, DeviceNow
from emulator.workloads.training import PARALLELISMS, training_step
from traces.atrace.model.trace import Trace

__all__ = [
    "JobCapture", "JobRun", "JobSpec", "Rank", "condition_of", "emulated_conditions", "make_job",
    "run_job", "run_job_live", "select_devices", "transfer_ns",
]

NETWORK_GBPS = 12.5  # between hosts: one 100 Gb/s link per host
HOP_LATENCY_S = 5e-6  # per step of the ring
#: GB/s per lane of each PCIe generation (after line encoding).
PCIE_LANE_GBPS = {1: 0.25, 2: 0.5, 3: 0.985, 4: 1.969, 5: 3.938, 6: 7.563}
#: GB/s per direction of the device-to-device fabric inside one host (NVLink/xGMI-class), by
#: device type: ranks that share a host all-reduce over it, not over PCIe, as tensor-parallel
#: groups do on hardware (a type without one uses its PCIe link).
FABRIC_GBPS = {"gpu": 300.0}
CONDITION_EVERY_S = 0.1  # a device's conditions are read at most this often per rank
MAX_RANKS = 4096


@dataclass(frozen=True)
class Rank:
    rank: int
    serial: str
    host: str
    device_type: str
    sw_version: str


@dataclass(frozen=True)
class JobSpec:
    """A job: its name, its parallelism and its ranks (rank k is ``ranks[k]``)."""

    name: str
    ranks: tuple[Rank, ...]
    parallelism: str = "data"

    def __post_init__(self) -> None:
        if not self.name.strip():
            raise ValueError("a job needs a name")
        if self.parallelism not in PARALLELISMS:
            raise ValueError(f"unknown parallelism {self.parallelism!r}; expected one of {', '.join(PARALLELISMS)}")
        if not 1 <= len(self.ranks) <= MAX_RANKS:
            raise ValueError(f"a job has 1 to {MAX_RANKS} ranks, not {len(self.ranks)}")
        if [r.rank for r in self.ranks] != list(range(len(self.ranks))):
            raise ValueError("ranks are numbered 0..N-1 in order")
        serials = [r.serial for r in self.ranks]
        if len(set(serials)) != len(serials):
            raise ValueError("a device can hold only one rank of a job")

    @property
    def world_size(self) -> int:
        return len(self.ranks)

    @property
    def hosts(self) -> list[str]:
        return sorted({r.host for r in self.ranks})

    def group(self) -> dict:
        """The default process group, as the collectives' args name it."""
        ranks = "[" + ", ".join(str(r.rank) for r in self.ranks) + "]"
        return {"name": "0", "desc": "default_pg", "size": self.world_size, "ranks": ranks}


def select_devices(
    cfg: FleetConfig,
    *,
    serials: Iterable[str] | None = None,
    hosts: Iterable[str] | None = None,
    device_type: str | None = None,
) -> list[DeviceSpec]:
    """Devices of the fleet for a job: the given serials in that order, or every device of
    the given hosts (all hosts when none), optionally of one type only."""
    layout = fleet_layout(cfg)
    if serials is not None:
        by_serial = {d.serial: d for h in layout for d in h.devices}
        wanted = list(serials)
        unknown = [s for s in wanted if s not in by_serial]
        if unknown:
            raise ValueError(f"no device {', '.join(map(repr, unknown))} in this fleet")
        chosen = [by_serial[s] for s in wanted]
    else:
        names = set(hosts) if hosts is not None else None
        chosen = [d for h in layout if names is None or h.name in names for d in h.devices]
    if device_type is not None:
        chosen = [d for d in chosen if d.type == device_type]
    if not chosen:
        raise ValueError("no device matches: a job needs at least one")
    return chosen


def make_job(name: str, devices: Iterable[DeviceSpec], parallelism: str = "data") -> JobSpec:
    """A job with one rank per device, in the order given."""
    ranks = tuple(Rank(k, d.serial, d.host, d.type, d.sw_version) for k, d in enumerate(devices))
    return JobSpec(name, ranks, parallelism)


# -- how a device runs now -----------------------------------------------------------------
def link_share(gen: int, width: int, full_gen: int, full_width: int) -> float:
    """Bandwidth of a PCIe link as trained over that of the full link."""
    return PCIE_LANE_GBPS.get(gen, 1.0) * width / (PCIE_LANE_GBPS.get(full_gen, 1.0) * full_width)


def condition_of(state: DevicePhysics) -> DeviceNow:
    """What a job's rank sees of its device: clock, link, faults, whether it answers."""
    dtype = lookup_type(state.type)
    gen, width = state.pcie_link(dtype)
    return DeviceNow(
        load=state.load,
        faults=frozenset(state.faults),
        clock_share=min(1.0, state.clock_mhz / dtype.max_clock_mhz),
        link_share=link_share(gen, width, dtype.pcie_gen, dtype.pcie_width),
        serving=not state.rebooting and "hang" not in state.faults,
        ecc_per_s=physics.ecc_rate(state, dtype),
    )


Conditions = Callable[[Rank, float], DeviceNow]


def emulated_conditions(hosts: Mapping[str, EmulatedHost]) -> Conditions:
    """Conditions read from emulated hosts held in memory, advanced to the asked time."""

    def now(rank: Rank, t: float) -> DeviceNow:
        host = hosts[rank.host]
        host.advance(t)
        return condition_of(host.state(rank.serial))

    return now


def transfer_ns(nbytes: float, links_gbps: list[float], hosts: int) -> int:
    """Time a ring all-reduce of ``nbytes`` takes once everyone has arrived: every rank
    sends and receives 2(N-1)/N of the message over the ring's slowest link."""
    n = len(links_gbps)
    if n < 2:
        return 0
    bandwidth = min(links_gbps)
    if hosts > 1:
        bandwidth = min(bandwidth, NETWORK_GBPS)
    wire = 2 * (n - 1) / n * nbytes
    return int((wire / (bandwidth * 1e9) + 2 * (n - 1) * HOP_LATENCY_S) * 1e9)


# -- running a job ---------------------------------------------------------------------------
@dataclass
class JobCapture:
    """What a job's capture produced: a trace per traced rank that completed, and why the
    others have none."""

    spec: JobSpec
    traces: dict[int, Trace]
    failed: dict[int, str]
    untraced: list[int]
    steps_kept: int
    steps_run: int
    start_s: float
    duration_s: float
    meta: dict = field(default_factory=dict)


class JobRun:
    """A job stepping through a window; every rank's recorder advances in lock step at each
    collective."""

    def __init__(self, spec: JobSpec, conditions: Conditions, *, start_s: float, duration_s: float,
                 seed: int = 0, traced: Iterable[int] | None = None, max_events: int = MAX_EVENTS) -> None:
        self.spec = spec
        self.conditions = conditions
        self.start_s, self.duration_s = start_s, duration_s
        self.start_ns, self.end_ns = int(start_s * 1e9), int((start_s + duration_s) * 1e9)
        self.seed, self.max_events = seed, max_events
        traced = set(range(spec.world_size) if traced is None else traced)
        self.recorders: dict[int, RankRecorder] = {}
        group = spec.group()
        for r in spec.ranks:
            step = training_step(r.device_type, spec.parallelism, spec.world_size)
            rec = RankRecorder(r.rank, r.device_type, r.sw_version, step, group,
                               noise.mix(seed, r.rank, 0x70B), traced=r.rank in traced)
            rec.core_free, rec.dma_free, rec.comm_free, rec.t = {}, self.start_ns, self.start_ns, self.start_ns
            self.recorders[r.rank] = rec
        self.traced = sorted(traced & set(self.recorders))
        self.failed: dict[int, str] = {}
        self.cursor = self.start_ns
        self.stopped = False
        self.recording = True
        self.steps_kept = self.steps_run = 0
        self._step_events = 0
        self._cache: dict[int, tuple[int, DeviceNow]] = {}

    def _now(self, rank: Rank, t_ns: int) -> DeviceNow:
        bucket = int(t_ns / 1e9 / CONDITION_EVERY_S)
        hit = self._cache.get(rank.rank)
        if hit is None or hit[0] != bucket:
            hit = self._cache[rank.rank] = (bucket, self.conditions(rank, t_ns / 1e9))
        return hit[1]

    def _fits(self) -> bool:
        need = max(self._step_events, 1)
        return all(self.recorders[r].events + need <= self.max_events for r in self.traced if r not in self.failed)

    def step(self) -> bool:
        """Run one training step on every rank; False once the job can go no further."""
        if self.stopped:
            return False
        if self.recording and not self._fits():
            self.recording = False
            for rec in self.recorders.values():
                rec.stop_recording()
        before = {r: self.recorders[r].events for r in self.traced}
        active = [r for r in self.spec.ranks if r.rank not in self.failed]
        nows = {}
        for r in active:
            rec = self.recorders[r.rank]
            now = self._now(r, rec.t)
            if not now.serving:
                when = (rec.t - self.start_ns) / 1e9
                state = "reboots" if "hang" not in now.faults else "stopped answering"
                self.failed[r.rank] = f"device {r.serial} {state} {when:.1f} s into the capture"
            nows[r.rank] = now
        active = [r for r in active if r.rank not in self.failed]
        for r in active:
            self.recorders[r.rank].begin_step(self.recorders[r.rank].t, nows[r.rank])
        if self.failed and self.spec.world_size > 1:
            self._stall(active)
            return False
        for segment in self.recorders[0].training.segments():
            arrivals = {r.rank: self.recorders[r.rank].run_segment(segment) for r in active}
            if segment[-1].kind == "collective":
                self._settle(segment[-1], active, arrivals)
        self.cursor = min(self.recorders[r.rank].end_step() for r in active)
        self.steps_run += 1
        if self.recording:
            self.steps_kept += 1
            self._step_events = max((self.recorders[r].events - n for r, n in before.items()), default=0)
        return bool(active)

    def _settle(self, node, active: list[Rank], arrivals: dict[int, int]) -> None:
        hosts = len({r.host for r in active})
        if hosts == 1 and all(r.device_type in FABRIC_GBPS for r in active):
            links = [FABRIC_GBPS[r.device_type] for r in active]
        else:
            links = [profile_for(r.device_type).pcie_gbps * self.recorders[r.rank].now.link_share for r in active]
        end = max(arrivals.values()) + transfer_ns(node.bytes, links, hosts)
        for r in active:
            self.recorders[r.rank].settle(node, arrivals[r.rank], end)

    def _stall(self, active: list[Rank]) -> None:
        """A rank is gone: the others reach their next collective and wait there until the
        capture ends."""
        segment = self.recorders[0].training.segments()[0]
        for r in active:
            rec = self.recorders[r.rank]
            arrival = rec.run_segment(segment)
            if arrival is not None:
                rec.settle(segment[-1], arrival, max(self.end_ns, arrival + 1))
            rec.end_step(until=max(self.end_ns, rec.t + 1))
        self.stopped = True

    def finish(self) -> JobCapture:
        traces = {}
        for r in self.spec.ranks:
            if r.rank not in self.traced or r.rank in self.failed:
                continue
            rec = self.recorders[r.rank]
            rec.builder.meta.update(self._meta(r, rec))
            traces[r.rank] = rec.builder.build()
        untraced = [r.rank for r in self.spec.ranks if r.rank not in self.traced]
        return JobCapture(self.spec, traces, dict(self.failed), untraced, self.steps_kept, self.steps_run,
                          self.start_s, self.duration_s)

    def _meta(self, r: Rank, rec: RankRecorder) -> dict:
        spec = self.spec
        meta = {
            "distributedInfo": {
                "backend": "nccl", "rank": r.rank, "world_size": spec.world_size, "pg_count": 1,
                "pg_config": [{"pg_name": "0", "pg_desc": "default_pg", "backend_config": "emu:nccl",
                               "pg_size": spec.world_size, "ranks": [x.rank for x in spec.ranks]}],
            },
            "job": spec.name, "parallelism": spec.parallelism, "host": r.host, "device_serial": r.serial,
            "device_type": r.device_type, "device_model": rec.model, "workload": rec.training.workload,
            "sw_version": r.sw_version, "seed": self.seed, "start_epoch_s": self.start_s,
            "duration_s": self.duration_s, "steps": self.steps_kept, "steps_run": self.steps_run,
        }
        if self.steps_kept < self.steps_run:
            meta["truncated_at_events"] = self.max_events
        return meta


def run_job(spec: JobSpec, duration_s: float, conditions: Conditions, *, start_s: float = 0.0,
            seed: int = 0, traced: Iterable[int] | None = None, max_events: int = MAX_EVENTS,
            progress: Callable[[float, dict[int, int], dict[int, str]], None] | None = None) -> JobCapture:
    """Play ``duration_s`` seconds of the job from ``start_s`` (emulated time), as fast as it
    goes. ``traced``: the ranks to record (default all; the others still run)."""
    if duration_s <= 0:
        raise ValueError("duration_s must be positive")
    run = JobRun(spec, conditions, start_s=start_s, duration_s=duration_s, seed=seed, traced=traced,
                 max_events=max_events)
    while run.cursor < run.end_ns and run.step():
        if progress is not None:
            progress(min(1.0, (run.cursor - run.start_ns) / (run.end_ns - run.start_ns)), _events(run), dict(run.failed))
    if progress is not None:
        progress(1.0, _events(run), dict(run.failed))
    return run.finish()


def run_job_live(spec: JobSpec, duration_s: float, conditions: Conditions, *, seed: int = 0,
                 traced: Iterable[int] | None = None, max_events: int = MAX_EVENTS,
                 progress: Callable[[float, dict[int, int], dict[int, str]], None] | None = None,
                 clock: Callable[[], float] = time.time,
                 sleep: Callable[[float], None] = time.sleep) -> JobCapture:
    """Trace the next ``duration_s`` seconds of wall-clock time of the job (epoch timestamps);
    steps run as their time comes. ``progress(fraction, events per traced rank, why each
    failed rank failed)`` is called as it goes."""
    if not 0 < duration_s <= 3600:
        raise ValueError("duration_s must be in (0, 3600]")
    run = JobRun(spec, conditions, start_s=clock(), duration_s=duration_s, seed=seed, traced=traced,
                 max_events=max_events)
    going = True
    while True:
        now_ns = int(clock() * 1e9)
        while going and run.cursor < min(now_ns, run.end_ns):
            going = run.step()
        if now_ns >= run.end_ns:
            break
        if progress is not None:
            progress((now_ns - run.start_ns) / (run.end_ns - run.start_ns), _events(run), dict(run.failed))
        sleep(min(0.1, (run.end_ns - now_ns) / 1e9))
    if progress is not None:
        progress(1.0, _events(run), dict(run.failed))
    return run.finish()


def _events(run: JobRun) -> dict[int, int]:
    return {r: run.recorders[r].events for r in run.traced if r not in run.failed}
