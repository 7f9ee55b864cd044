"""Trace capture from an emulated device: run its workload with tracing on.

:func:`capture` plays the device's operator graph (``emulator.workloads``) step after step
for the asked stretch of emulated time and records what a real tracer would see:

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
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable

from emulator.devices import DEVICE_TYPES, FAULTS
from emulator.workloads import op_time_us, workload_for
from traces.atrace.builder import TraceBuilder
from traces.atrace.model import EdgeKind, Kind, Trace

__all__ = ["capture", "MAX_EVENTS"]

MAX_EVENTS = 400_000  # a capture stops early (and says so in meta) beyond this many events
US = 1000  # ns


def _cores(device_type: str) -> tuple[int, str]:
    dt = DEVICE_TYPES.get(device_type)
    return (dt.cores, dt.model) if dt is not None else (4, device_type)


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
) -> Trace:
    """Trace ``duration_s`` seconds (emulated time) of a device of ``device_type``."""
    if duration_s <= 0:
        raise ValueError("duration_s must be positive")
    faults = set(faults)
    if faults - set(FAULTS):
        raise ValueError(f"unknown faults {sorted(faults - set(FAULTS))}; known: {sorted(FAULTS)}")
    workload = workload_for(device_type)
    n_cores, model = _cores(device_type)
    rng = random.Random(seed)
    end_ns = int(duration_s * 1e9)

    b = TraceBuilder(source="emulator")
    b.meta.update(
        {
            "device_type": device_type,
            "device_model": model,
            "workload": workload.name,
            "sw_version": sw_version,
            "seed": seed,
            "slowdown": slowdown,
            "faults": sorted(faults),
            "duration_s": duration_s,
        }
    )
    host = b.track("host", 1, process_name="host", thread_name="framework", sort_index=0)
    dev_pid = f"{device_type} 0"
    cores = [
        b.track(
            dev_pid,
            c,
            process_name=f"{model} (device 0)",
            thread_name=f"core {c}",
            is_device=True,
            device=0,
            stream=c,
            sort_index=10 + c,
        )
        for c in range(n_cores)
    ]
    dma = b.track(
        dev_pid,
        "dma",
        process_name=f"{model} (device 0)",
        thread_name="DMA engine",
        is_device=True,
        device=0,
        stream=n_cores,
        sort_index=9,
    )
    usable = cores[1:] if "core_stuck" in faults and n_cores > 1 else cores
    core_free = {c: 0 for c in usable}
    dma_free = 0
    hang_at = int(end_ns * 0.3) if "hang" in faults else None
    if "core_stuck" in faults and n_cores > 1:
        b.add(
            "core stalled",
            0,
            end_ns,
            cores[0],
            kind=Kind.KERNEL,
            cat="kernel",
            op="stall",
            args={"fault": "core_stuck"},
        )

    major = int(sw_version.split(".")[0]) if sw_version.split(".")[0].isdigit() else 2
    dispatch_us = 4.0 if major >= 2 else 7.0  # older framework releases dispatch slower
    t = 0  # host clock
    corr = 0
    step = 0

    def jitter() -> float:
        return rng.uniform(0.95, 1.08)

    while t < end_ns and b.count < max_events:
        step_start = t
        done: dict[int, tuple[int, int]] = {}  # node id -> (event, end ns)
        for node in workload.nodes:
            deps_end = max((done[d][1] for d in node.deps), default=0)
            leak = min(step * 0.05, 40.0) if "memory_leak" in faults else 0.0
            if node.kind == "host":
                if deps_end > t:  # needs device results: wait for them
                    b.add(
                        "rtStreamSynchronize",
                        t,
                        deps_end - t,
                        host,
                        kind=Kind.RUNTIME,
                        cat="runtime",
                    )
                    t = deps_end
                dur = int(op_time_us(node, device_type, sw_version) * jitter() * US)
                ev = b.add(
                    node.name,
                    t,
                    dur,
                    host,
                    kind=Kind.HOST_OP,
                    cat="host_op",
                    op=node.op_type,
                    args={"node_id": node.id, "shapes": node.shapes},
                )
                t += dur
                done[node.id] = (ev, t)
            else:
                node_slow = slowdown
                if node.kind == "compute" and "overheat" in faults:
                    node_slow *= 1.6
                if node.kind == "dma" and "pcie_degraded" in faults:
                    node_slow *= 4.0
                dur = op_time_us(node, device_type, sw_version, node_slow) * jitter()
                retry = "ecc_storm" in faults and rng.random() < 0.05
                if retry:
                    dur *= 2.0
                dur_ns = max(int(dur * US), 1)
                corr += 1
                fw_start = t
                launch_start = fw_start + int((dispatch_us + leak) * jitter() * US)
                launch_end = launch_start + int(2.5 * jitter() * US)
                fw_end = launch_end + int(1.0 * US)
                call = "rtMemcpyAsync" if node.kind == "dma" else "rtLaunchKernel"
                b.add(
                    f"fw::{node.op_type}",
                    fw_start,
                    fw_end - fw_start,
                    host,
                    kind=Kind.HOST_OP,
                    cat="host_op",
                    args={"node_id": node.id, "shapes": node.shapes},
                )
                b.add(
                    call,
                    launch_start,
                    launch_end - launch_start,
                    host,
                    kind=Kind.RUNTIME,
                    cat="runtime",
                    corr=corr,
                )
                ready = max(launch_end + int(3 * US), deps_end)
                if node.kind == "dma":
                    start = max(ready, dma_free)
                    track, kind, cat = dma, Kind.MEMCPY, "dma"
                    dma_free = start + dur_ns
                else:
                    core = min(core_free, key=lambda c: (max(core_free[c], ready), c))
                    start = max(ready, core_free[core])
                    track, kind, cat = core, Kind.KERNEL, "kernel"
                    core_free[core] = start + dur_ns
                if hang_at is not None and start + dur_ns > hang_at:
                    # The device stops: nothing completes; the host waits forever.
                    b.add(
                        "rtDeviceSynchronize",
                        t,
                        max(end_ns - t, 1),
                        host,
                        kind=Kind.RUNTIME,
                        cat="runtime",
                        args={"fault": "hang"},
                    )
                    b.meta["hung_at_us"] = hang_at / US
                    return _finish(b, step_start, t, step, progress, end_ns)
                args = {
                    "node_id": node.id,
                    "shapes": node.shapes,
                    "flops": node.flops,
                    "bytes": node.bytes,
                }
                if retry:
                    args["ecc_retry"] = True
                ev = b.add(
                    node.name,
                    start,
                    dur_ns,
                    track,
                    kind=kind,
                    cat=cat,
                    op=node.op_type,
                    corr=corr,
                    args=args,
                )
                t = fw_end
                done[node.id] = (ev, start + dur_ns)
            for d in node.deps:
                b.edge(done[d][0], done[node.id][0], EdgeKind.DATA)
        last = max(end for _, end in done.values())
        sync_end = max(last, t + int(1 * US))
        b.add("rtDeviceSynchronize", t, sync_end - t, host, kind=Kind.RUNTIME, cat="runtime")
        t = sync_end + int(rng.uniform(10, 20) * US)
        b.add(
            f"step#{step}",
            step_start,
            t - step_start,
            host,
            kind=Kind.ANNOTATION,
            cat="user_annotation",
            op="step",
        )
        step += 1
        if progress is not None:
            progress(min(t / end_ns, 1.0))
    if t < end_ns:
        b.meta["truncated_at_events"] = max_events
    b.meta["steps"] = step
    if progress is not None:
        progress(1.0)
    return b.build()


def _finish(b: TraceBuilder, step_start: int, t: int, step: int, progress, end_ns: int) -> Trace:
    b.add(
        f"step#{step}",
        step_start,
        max(end_ns - step_start, 1),
        0,
        kind=Kind.ANNOTATION,
        cat="user_annotation",
        op="step",
    )
    b.meta["steps"] = step + 1
    if progress is not None:
        progress(1.0)
    return b.build()


def device_types() -> list[str]:
    """Device types whose workload tracing knows (those with a cost profile)."""
    from emulator.workloads import COST_PROFILES

    return sorted(COST_PROFILES)
