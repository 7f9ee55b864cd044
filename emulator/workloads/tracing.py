"""Trace capture from an emulated device: run its workload with tracing on.

Two ways to capture:

* :func:`capture` plays the device's operator graph (``emulator.workloads.graph``) step after
  step for a stretch of *emulated* time, as fast as it can (tests, notebooks);
* :func:`capture_live` paces the same steps in *wall-clock* time: a 5 s capture takes 5 s,
  its timestamps are the epoch times they stand for, and before every step it asks the
  device as it is now (load, faults), so the trace lines up with the device's samples.
  Past an event budget it keeps whole iterations only and counts the ones it dropped.

What a step records, as a real tracer would see it:

* host thread ``framework``: one ``step#N`` annotation per step, a framework operator
  (``fw::<op type>``) per graph node, and inside it the runtime call that launches the
  node's device work (``rtLaunchKernel``, ``rtMemcpyAsync``) with a correlation id;
  host-side graph nodes (preprocessing) run there too, after a ``rtStreamSynchronize``
  when they need device results; each step ends with ``rtDeviceSynchronize``;
* one track per accelerator core: compute operators, each on the core that frees first;
* one DMA engine track: transfers;
* the graph's data dependencies as explicit edges.

Operator times come from ``op_time_us`` (device type, software version, slowdown), with a
seeded jitter, so a capture is reproducible and an older software version or a fault shows
in the breakdown and on the critical path. Faults: ``overheat`` (throttled compute),
``pcie_degraded`` (slow transfers), ``ecc_storm`` (retried kernels), ``core_stuck`` (one
core does nothing), ``memory_leak`` (host allocation overhead grows), ``hang`` (the device
stops; the trace ends in a synchronisation that never returns).

Problems (``problems=``), for the advisor's known answers; each records its injected size
per step in ``trace.meta["problems"]`` (µs):

* ``launch_bound``: the device serves a small-batch decode (``workloads.decode``) from an
  eager Python loop: 30 µs of framework time per operator, kernels of a few µs;
* ``host_sync``: halfway through each step the host reads a device value (``fw::item``:
  ``rtStreamSynchronize`` until the device is done), then works 150 µs on it (injected: the
  part of that work the device's backlog could have hidden);
* ``pageable_copies``: host-device copies from pageable memory: the copy call returns only
  when the transfer is done (injected: the host's extra wait);
* ``input_stall``: each step starts with 300 µs in the data loader while the device idles.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from emulator.devices.zoo import DEVICE_TYPES, FAULTS
from emulator.workloads.graph import WORKLOADS, OpNode, op_time_us, workload_for
from traces.atrace.model.builder import TraceBuilder
from traces.atrace.model.trace import EdgeKind, Kind, Trace

__all__ = ["capture", "capture_live", "DeviceNow", "DeviceHung", "MAX_EVENTS", "PROBLEMS"]

MAX_EVENTS = 400_000  # default event budget of a capture
US = 1000  # ns
#: Longest idle gap between two steps of a lightly loaded device.
MAX_IDLE_S = 0.5
#: Problems a capture can have (see the module's notes).
PROBLEMS = ("launch_bound", "host_sync", "pageable_copies", "input_stall")
PYTHON_LOOP_US = 30.0  # framework time per operator of an eager decode loop
SYNC_WORK_US = 150.0  # host work on the value a step's sync read
INPUT_STALL_US = 300.0  # the data loader at the start of each step


class DeviceHung(RuntimeError):
    """The device stopped answering during a live capture."""


@dataclass(frozen=True)
class DeviceNow:
    """What a live capture asks the device before each step."""

    load: float = 1.0  # share of time the device is busy, 0..1
    faults: frozenset[str] = frozenset()
    clock_share: float = 1.0  # clock over the type's maximum (a throttled device is below 1)
    link_share: float = 1.0  # PCIe bandwidth as trained over the type's full link
    serving: bool = True  # False while the device reboots or hangs
    ecc_per_s: float = 0.0  # corrected memory errors a second


def _cores(device_type: str) -> tuple[int, str]:
    dt = DEVICE_TYPES.get(device_type)
    return (dt.cores, dt.model) if dt is not None else (4, device_type)


def _check_faults(faults: Iterable[str]) -> set[str]:
    faults = set(faults)
    if faults - set(FAULTS):
        raise ValueError(f"unknown faults {sorted(faults - set(FAULTS))}; known: {sorted(FAULTS)}")
    return faults


def _check_problems(problems: Iterable[str]) -> frozenset[str]:
    problems = frozenset(problems)
    if problems - set(PROBLEMS):
        raise ValueError(f"unknown problems {sorted(problems - set(PROBLEMS))}; known: {sorted(PROBLEMS)}")
    return problems


class _NullSink:
    """Takes events and edges and keeps nothing: steps past the event budget run here."""

    def __init__(self) -> None:
        self.count = 0

    def add(self, *args, **kwargs) -> int:
        self.count += 1
        return self.count - 1

    def edge(self, *args) -> None:
        pass


@dataclass
class _Recorder:
    """The device's tracks and clocks, and how one step of its workload is recorded."""

    device_type: str
    sw_version: str
    slowdown: float
    rng: random.Random
    builder: TraceBuilder = field(default_factory=lambda: TraceBuilder(source="emulator"))
    corr: int = 0
    steps: int = 0
    dma_free: int = 0
    core_free: dict[int, int] = field(default_factory=dict)
    problems: frozenset[str] = frozenset()
    injected: dict[str, float] = field(default_factory=dict)  # problem -> µs, summed over steps

    def __post_init__(self) -> None:
        self.workload = WORKLOADS["decode"] if "launch_bound" in self.problems else workload_for(self.device_type)
        n_cores, self.model = _cores(self.device_type)
        b = self.builder
        self.host = b.track("host", 1, process_name="host", thread_name="framework", sort_index=0)
        dev_pid, proc = f"{self.device_type} 0", f"{self.model} (device 0)"
        self.cores = [
            b.track(dev_pid, c, process_name=proc, thread_name=f"core {c}", is_device=True,
                    device=0, stream=c, sort_index=10 + c)
            for c in range(n_cores)
        ]
        self.dma = b.track(dev_pid, "dma", process_name=proc, thread_name="DMA engine",
                           is_device=True, device=0, stream=n_cores, sort_index=9)
        major = self.sw_version.split(".")[0]
        # Older framework releases dispatch slower.
        self.dispatch_us = 4.0 if not major.isdigit() or int(major) >= 2 else 7.0
        if "launch_bound" in self.problems:
            self.dispatch_us += PYTHON_LOOP_US
        self.hung_at: int | None = None

    def jitter(self) -> float:
        return self.rng.uniform(0.95, 1.08)

    def usable_cores(self, faults: set[str]) -> list[int]:
        stuck = "core_stuck" in faults and len(self.cores) > 1
        return self.cores[1:] if stuck else self.cores

    def mark_stuck_core(self, start: int, end: int, faults: set[str]) -> None:
        if "core_stuck" in faults and len(self.cores) > 1:
            self.builder.add("core stalled", start, end - start, self.cores[0], kind=Kind.KERNEL,
                             cat="kernel", op="stall", args={"fault": "core_stuck"})

    # -- one step ----------------------------------------------------------------------
    def step(self, t: int, faults: set[str], sink=None, hang_at: int | None = None) -> int:
        """Record one iteration of the workload starting at ``t`` (ns); returns its end.

        ``sink`` replaces the trace builder (a :class:`_NullSink` keeps timing only).
        When the device hangs (``hang_at``), the step ends in a synchronisation that lasts
        to ``hang_at``'s horizon and :attr:`hung_at` is set.
        """
        sink = sink or self.builder
        for c in self.usable_cores(faults):
            self.core_free.setdefault(c, 0)
        step_start = t
        done: dict[int, tuple[int, int]] = {}  # node id -> (event, end ns)
        if "input_stall" in self.problems:
            t = self._input_stall(sink, t)
        halfway = len(self.workload.nodes) // 2
        for k, node in enumerate(self.workload.nodes):
            if k == halfway and "host_sync" in self.problems:
                t = self._item(sink, t)
            deps_end = max((done[d][1] for d in node.deps), default=0)
            if node.kind == "host":
                t = self._host_node(sink, node, t, deps_end, done)
            else:
                t = self._device_node(sink, node, t, deps_end, done, faults, hang_at)
                if self.hung_at is not None:
                    return t
            for d in node.deps:
                sink.edge(done[d][0], done[node.id][0], EdgeKind.DATA)
        last = max(end for _, end in done.values())
        sync_end = max(last, t + int(1 * US))
        sink.add("rtDeviceSynchronize", t, sync_end - t, self.host, kind=Kind.RUNTIME, cat="runtime")
        t = sync_end + int(self.rng.uniform(10, 20) * US)
        self._step_annotation(sink, step_start, t)
        return t

    def _input_stall(self, sink, t: int) -> int:
        """The data loader at the start of the step: collation inside a loader range."""
        dur = int(INPUT_STALL_US * US)
        sink.add("enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__", t, dur, self.host,
                 kind=Kind.ANNOTATION, cat="user_annotation")
        sink.add("fw::collate", t + int(5 * US), dur - int(10 * US), self.host, kind=Kind.HOST_OP, cat="host_op",
                 op="collate")
        idle_from = max(self.dma_free, max(self.core_free.values(), default=0))
        self._inject("input_stall", (t + dur - max(t, idle_from)) / US)
        return t + dur

    def _item(self, sink, t: int) -> int:
        """The host reads a device value: it waits for the device, then works on the value."""
        device_done = max(self.dma_free, max(self.core_free.values(), default=0))
        sync_start = t + int(2 * US)
        sync_end = max(device_done, sync_start + int(1 * US))
        sink.add("rtStreamSynchronize", sync_start, sync_end - sync_start, self.host, kind=Kind.RUNTIME,
                 cat="runtime")
        sink.add("fw::item", t, sync_end + int(1 * US) - t, self.host, kind=Kind.HOST_OP, cat="host_op", op="item")
        work_start = sync_end + int(2 * US)
        work = int(SYNC_WORK_US * US)
        sink.add("fw::sample", work_start, work, self.host, kind=Kind.HOST_OP, cat="host_op", op="sample")
        # What the device's backlog at the sync could have hidden of that work.
        self._inject("host_sync", min(work, max(device_done - sync_start, 0)) / US)
        return work_start + work

    def _inject(self, problem: str, us: float) -> None:
        self.injected[problem] = self.injected.get(problem, 0.0) + us

    def _step_annotation(self, sink, start: int, end: int) -> None:
        sink.add(f"step#{self.steps}", start, max(end - start, 1), self.host,
                 kind=Kind.ANNOTATION, cat="user_annotation", op="step")
        self.steps += 1

    def _host_node(self, sink, node: OpNode, t: int, deps_end: int, done) -> int:
        if deps_end > t:  # needs device results: wait for them
            sink.add("rtStreamSynchronize", t, deps_end - t, self.host, kind=Kind.RUNTIME, cat="runtime")
            t = deps_end
        dur = int(op_time_us(node, self.device_type, self.sw_version) * self.jitter() * US)
        ev = sink.add(node.name, t, dur, self.host, kind=Kind.HOST_OP, cat="host_op",
                      op=node.op_type, args={"node_id": node.id, "shapes": node.shapes})
        done[node.id] = (ev, t + dur)
        return t + dur

    def _node_slowdown(self, node: OpNode, faults: set[str]) -> float:
        slow = self.slowdown
        if node.kind == "compute" and "overheat" in faults:
            slow *= 1.6
        if node.kind == "dma" and "pcie_degraded" in faults:
            slow *= 4.0
        return slow

    def _device_node(self, sink, node: OpNode, t: int, deps_end: int, done, faults, hang_at) -> int:
        dur = op_time_us(node, self.device_type, self.sw_version, self._node_slowdown(node, faults))
        dur *= self.jitter()
        retry = "ecc_storm" in faults and self.rng.random() < 0.05
        dur_ns = max(int(dur * (2.0 if retry else 1.0) * US), 1)
        self.corr += 1
        leak = min(self.steps * 0.05, 40.0) if "memory_leak" in faults else 0.0
        launch_start = t + int((self.dispatch_us + leak) * self.jitter() * US)
        launch_end = launch_start + int(2.5 * self.jitter() * US)
        fw_end = launch_end + int(1.0 * US)
        shapes = {"node_id": node.id, "shapes": node.shapes}
        call = "rtMemcpyAsync" if node.kind == "dma" else "rtLaunchKernel"
        start, track, kind, cat = self._place(node, max(launch_end + int(3 * US), deps_end), dur_ns, faults)
        if node.kind == "dma" and "pageable_copies" in self.problems:
            # From pageable memory the call stages the data and returns when the copy is done.
            call = "rtMemcpy"
            blocked = start + dur_ns + int(1 * US)
            self._inject("pageable_copies", (blocked - launch_end) / US)
            fw_end += blocked - launch_end
            launch_end = blocked
        sink.add(f"fw::{node.op_type}", t, fw_end - t, self.host, kind=Kind.HOST_OP,
                 cat="host_op", args=shapes)
        sink.add(call, launch_start, launch_end - launch_start, self.host, kind=Kind.RUNTIME,
                 cat="runtime", corr=self.corr)
        if hang_at is not None and start + dur_ns > hang_at:
            self.hung_at = hang_at
            return t
        args = {**shapes, "flops": node.flops, "bytes": node.bytes}
        if retry:
            args["ecc_retry"] = True
        ev = sink.add(node.name, start, dur_ns, track, kind=kind, cat=cat, op=node.op_type,
                      corr=self.corr, args=args)
        done[node.id] = (ev, start + dur_ns)
        return fw_end

    def _place(self, node: OpNode, ready: int, dur_ns: int, faults) -> tuple[int, int, Kind, str]:
        """Start, track, kind and category of a device node: the DMA engine or the core
        that frees first."""
        if node.kind == "dma":
            start = max(ready, self.dma_free)
            self.dma_free = start + dur_ns
            return start, self.dma, Kind.MEMCPY, "dma"
        usable = self.usable_cores(faults)
        core = min(usable, key=lambda c: (max(self.core_free.get(c, 0), ready), c))
        start = max(ready, self.core_free.get(core, 0))
        self.core_free[core] = start + dur_ns
        return start, core, Kind.KERNEL, "kernel"

    def hang(self, t: int, end: int, step_start: int) -> None:
        """The device stops: nothing completes; the host waits until the capture ends."""
        self.builder.add("rtDeviceSynchronize", t, max(end - t, 1), self.host, kind=Kind.RUNTIME,
                         cat="runtime", args={"fault": "hang"})
        self._step_annotation(self.builder, step_start, max(end, step_start + 1))

    def record_problems(self) -> None:
        """The problems and their injected size per step (µs) in the trace's meta."""
        if self.problems:
            self.builder.meta["problems"] = {
                p: round(self.injected.get(p, 0.0) / max(self.steps, 1), 3) for p in sorted(self.problems)
            }

    def meta(self, **extra) -> dict:
        return {
            "device_type": self.device_type,
            "device_model": self.model,
            "workload": self.workload.name,
            "sw_version": self.sw_version,
            "slowdown": self.slowdown,
            **extra,
        }


def capture(
    device_type: str,
    duration_s: float,
    *,
    sw_version: str = "2.0",
    seed: int = 0,
    slowdown: float = 1.0,
    faults: Iterable[str] = (),
    progress: Callable[[float], None] | None = None,
    max_events: int = MAX_EVENTS,
    problems: Iterable[str] = (),
) -> Trace:
    """Trace ``duration_s`` seconds (emulated time) of a device of ``device_type``, with the
    given ``problems`` (see the module's notes)."""
    if duration_s <= 0:
        raise ValueError("duration_s must be positive")
    faults = _check_faults(faults)
    rec = _Recorder(device_type, sw_version, slowdown, random.Random(seed), problems=_check_problems(problems))
    end_ns = int(duration_s * 1e9)
    rec.builder.meta.update(rec.meta(seed=seed, faults=sorted(faults), duration_s=duration_s))
    rec.mark_stuck_core(0, end_ns, faults)
    hang_at = int(end_ns * 0.3) if "hang" in faults else None
    t = 0
    while t < end_ns and rec.builder.count < max_events:
        step_start = t
        t = rec.step(t, faults, hang_at=hang_at)
        if rec.hung_at is not None:
            rec.hang(t, end_ns, step_start)
            rec.builder.meta["hung_at_us"] = rec.hung_at / US
            break
        if progress is not None:
            progress(min(t / end_ns, 1.0))
    if t < end_ns and rec.hung_at is None:
        rec.builder.meta["truncated_at_events"] = max_events
    rec.builder.meta["steps"] = rec.steps
    rec.record_problems()
    if progress is not None:
        progress(1.0)
    return rec.builder.build()


@dataclass
class LiveCapture:
    """The outcome of :func:`capture_live`: the trace and how many iterations it kept."""

    trace: Trace
    iterations_kept: int
    iterations_run: int
    events_dropped: int


def capture_live(
    device_type: str,
    duration_s: float,
    device_now: Callable[[float], DeviceNow],
    *,
    sw_version: str = "2.0",
    seed: int = 0,
    max_events: int = MAX_EVENTS,
    progress: Callable[[float, int], None] | None = None,
    clock: Callable[[], float] = time.time,
    sleep: Callable[[float], None] = time.sleep,
    problems: Iterable[str] = (),
    serving: Callable[..., LiveCapture] | None = None,
) -> LiveCapture:
    """Trace the next ``duration_s`` seconds of wall-clock time of a running device.

    ``device_now(t)`` says the device's load and faults at epoch time ``t``; steps follow
    one another while the device is busy, with idle gaps that make its busy share match
    its load. Timestamps are epoch nanoseconds. Whole iterations are kept while they fit
    in ``max_events``; later ones still run (and are counted) but are not recorded.
    ``progress(fraction, events)`` is called as the capture goes; ``problems`` as for
    :func:`capture`. Raises :class:`DeviceHung` if the device hangs. ``serving``: a device
    that serves requests is captured by it instead (``emulator.serving.live``).
    """
    if not 0 < duration_s <= 3600:
        raise ValueError("duration_s must be in (0, 3600]")
    if serving is not None:
        return serving(duration_s, device_now, max_events=max_events, progress=progress, clock=clock, sleep=sleep)
    rec = _Recorder(device_type, sw_version, 1.0, random.Random(seed), problems=_check_problems(problems))
    start_s = clock()
    start, end = int(start_s * 1e9), int((start_s + duration_s) * 1e9)
    cursor, kept, dropped, step_events = start, 0, _NullSink(), 0
    rec.core_free = {}
    rec.dma_free = start
    while True:
        now_ns = int(clock() * 1e9)
        while cursor < min(now_ns, end):
            state = device_now(cursor / 1e9)
            faults = _check_faults(state.faults)
            if "hang" in faults:
                raise DeviceHung(f"the device hung {cursor / 1e9 - start_s:.1f} s into the capture")
            fits = rec.builder.count + max(step_events, 1) <= max_events
            before = rec.builder.count
            step_start = cursor
            cursor = rec.step(cursor, faults, sink=None if fits else dropped)
            if fits:
                kept += 1
                step_events = rec.builder.count - before
                rec.mark_stuck_core(step_start, cursor, faults)
            cursor += _idle_gap_ns(cursor - step_start, state.load)
        if now_ns >= end:
            break
        if progress is not None:
            progress((now_ns - start) / (end - start), rec.builder.count)
        sleep(min(0.1, (end - now_ns) / 1e9))
    rec.builder.meta.update(rec.meta(seed=seed, duration_s=duration_s, start_epoch_s=start_s,
                                     iterations_kept=kept, iterations_run=rec.steps))
    rec.record_problems()
    if progress is not None:
        progress(1.0, rec.builder.count)
    return LiveCapture(rec.builder.build(), kept, rec.steps, dropped.count)


def _idle_gap_ns(step_ns: int, load: float) -> int:
    """Idle time after a step so that busy / (busy + idle) is the device's load."""
    load = min(max(load, 0.01), 1.0)
    return min(int(step_ns * (1.0 - load) / load), int(MAX_IDLE_S * 1e9))


def device_types() -> list[str]:
    """Device types whose workload tracing knows (those with a cost profile)."""
    from emulator.workloads.graph import COST_PROFILES

    return sorted(COST_PROFILES)
