"""One rank of a distributed job, recorded as PyTorch's profiler (Kineto) would see it.

A rank's trace has the tracks of an emulated capture (``emulator.workloads.tracing``: the framework
thread, one track per accelerator core, the DMA engine) plus an NCCL-like communication
stream. Its collectives look like the ones Kineto writes for NCCL: on the host a
``nccl:all_reduce`` range around the kernel launch, on the device an
``ncclDevKernel_AllReduce_Sum_<dtype>_RING_LL`` kernel whose args carry ``Collective name``,
``In msg nelems``, ``dtype``, ``Group size``, ``Process Group Name`` / ``Ranks`` and the
collective's sequence number ``Seq``. The kernel starts when this rank arrives and ends when
the collective completes everywhere, so an early rank's kernel holds its wait, as NCCL
kernels do on real hardware.

Operator times follow the device as it is (:class:`~emulator.workloads.tracing.DeviceNow`): compute
stretches with a throttled clock, copies with a degraded PCIe link, an ECC storm retries
kernels and a stuck core takes no work (the recorder of ``emulator.workloads.tracing``).
"""

from __future__ import annotations

import random

from emulator.workloads.graph import OpNode
from emulator.workloads.tracing import US, DeviceNow, _NullSink, _Recorder
from emulator.workloads.training import DTYPES, TrainingStep
from traces.atrace.model.trace import EdgeKind, Kind

__all__ = ["RankRecorder"]

LAUNCH_TO_KERNEL_NS = 3 * US
#: The device stalls this long for each corrected ECC error while its driver handles it
#: (logs it, retires the page): an ECC storm of 150 errors a second costs 15 % of the time.
ECC_STALL_S = 1e-3
_KERNEL = "ncclDevKernel_AllReduce_Sum_{dtype}_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"
_KERNEL_DTYPE = {"Float": "f32", "Half": "f16"}


class RankRecorder(_Recorder):
    """Records one rank's steps, a segment at a time; the job settles each collective."""

    def __init__(self, rank: int, device_type: str, sw_version: str, training: TrainingStep,
                 group: dict, seed: int, traced: bool = True) -> None:
        super().__init__(device_type, sw_version, 1.0, random.Random(seed))
        self.rank = rank
        self.training = training
        self.group = group  # the process group's facts written on every collective
        self.traced = traced
        self.null = _NullSink()
        self.sink = self.builder if traced else self.null
        n_cores = len(self.cores)
        dev_pid, proc = f"{device_type} 0", f"{self.model} (device 0)"
        self.comm = self.builder.track(dev_pid, "nccl", process_name=proc, thread_name="NCCL stream",
                                       is_device=True, device=0, stream=n_cores + 1, sort_index=8)
        self.now = DeviceNow()
        self.faults: set[str] = set()
        self.t = 0
        self.step_start = 0
        self.comm_free = 0
        self.seq = 0
        self.done: dict[int, tuple[int, int]] = {}
        self.launched: dict[int, int] = {}  # collective node -> when its kernel could start

    @property
    def events(self) -> int:
        return self.builder.count

    def stop_recording(self) -> None:
        self.sink = self.null

    # -- how the device runs now -----------------------------------------------------------
    def _node_slowdown(self, node: OpNode, faults: set[str]) -> float:
        """Compute at the device's clock, copies at its link's bandwidth, both slowed by the
        handling of its memory errors (all from its state)."""
        ecc = 1.0 + self.now.ecc_per_s * ECC_STALL_S
        if node.kind == "compute":
            return ecc / max(self.now.clock_share, 0.05)
        if node.kind == "dma":
            return ecc / max(self.now.link_share, 0.01)
        return 1.0

    # -- a step ----------------------------------------------------------------------------
    def begin_step(self, t: int, now: DeviceNow) -> None:
        self.now = now
        self.faults = set(now.faults) - {"hang"}
        self.t = self.step_start = t
        self.done = {}
        for c in self.usable_cores(self.faults):
            self.core_free.setdefault(c, 0)

    def run_segment(self, nodes: list[OpNode]) -> int | None:
        """Run the nodes of a segment; returns when this rank reaches the collective that
        ends it (None when it ends in none)."""
        sink = self.sink
        for node in nodes:
            deps_end = max((self.done[d][1] for d in node.deps), default=0)
            if node.kind == "collective":
                return self._launch_collective(sink, node, deps_end)
            if node.kind == "host":
                self.t = self._host_node(sink, node, self.t, deps_end, self.done)
            else:
                self.t = self._device_node(sink, node, self.t, deps_end, self.done, self.faults, None)
            self._edges(sink, node)
        return None

    def _launch_collective(self, sink, node: OpNode, deps_end: int) -> int:
        self.corr += 1
        start = self.t + int(self.dispatch_us * self.jitter() * US)
        launch_end = start + int(2.5 * self.jitter() * US)
        sink.add("nccl:all_reduce", self.t, launch_end + US - self.t, self.host, kind=Kind.ANNOTATION,
                 cat="user_annotation", op="nccl:all_reduce")
        sink.add("rtLaunchKernel", start, launch_end - start, self.host, kind=Kind.RUNTIME,
                 cat="runtime", corr=self.corr)
        self.t = launch_end + US
        arrival = max(launch_end + LAUNCH_TO_KERNEL_NS, deps_end, self.comm_free)
        self.launched[node.id] = self.corr
        return arrival

    def settle(self, node: OpNode, arrival: int, end: int) -> None:
        """Record the collective's kernel: from this rank's arrival to its completion."""
        nelems = node.shapes[0][0]
        dtype = DTYPES[int(node.bytes // max(nelems, 1))]
        args = {
            "Collective name": "allreduce", "In msg nelems": nelems, "Out msg nelems": nelems,
            "Group size": self.group["size"], "dtype": dtype, "In split size": "[]", "Out split size": "[]",
            "Process Group Name": self.group["name"], "Process Group Description": self.group["desc"],
            "Process Group Ranks": self.group["ranks"], "Seq": self.seq,
        }
        self.seq += 1
        end = max(end + int(self.rng.uniform(0, 2) * US), arrival + 1)
        ev = self.sink.add(_KERNEL.format(dtype=_KERNEL_DTYPE[dtype]), arrival, end - arrival, self.comm,
                           kind=Kind.COMM, cat="kernel", op="allreduce", corr=self.launched.pop(node.id),
                           args=args)
        self.done[node.id] = (ev, end)
        self.comm_free = end
        self._edges(self.sink, node)

    def _edges(self, sink, node: OpNode) -> None:
        for d in node.deps:
            sink.edge(self.done[d][0], self.done[node.id][0], EdgeKind.DATA)

    def end_step(self, until: int | None = None) -> int:
        """The host waits for the device, and the step's annotation closes; returns its end.
        ``until``: the step never completes (a peer stopped): the wait lasts to then."""
        sink = self.sink
        last = max((end for _, end in self.done.values()), default=self.t)
        sync_end = until if until is not None else max(last, self.t + US)
        sink.add("rtDeviceSynchronize", self.t, max(sync_end - self.t, 1), self.host,
                 kind=Kind.RUNTIME, cat="runtime")
        end = sync_end if until is not None else sync_end + int(self.rng.uniform(10, 20) * US)
        sink.add(f"ProfilerStep#{self.steps}", self.step_start, max(end - self.step_start, 1), self.host,
                 kind=Kind.ANNOTATION, cat="user_annotation", op="ProfilerStep")
        self.steps += 1
        self.t = end
        return end
