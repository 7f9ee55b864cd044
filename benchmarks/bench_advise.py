"""The advisor at a million events: ``advise`` on top of loading the trace.

    .venv/bin/python benchmarks/bench_advise.py [--events 1000000] [--repeat 3]

Generates (cached under var/bench/advise/) Kineto traces of about ``--events`` events:

* ``synthetic``: the generator's training steps (tests.support.tracegen);
* ``cpu_only``: the synthetic trace's host events alone (no device work: the CPU-only
  account and rule 9);
* ``launch_bound``, ``host_sync``: the same model with one known problem each
  (tests.support.tracegen.problems), 20 steps deep enough to reach the size, so that
  the rules' what-ifs run (at that depth a 300 µs sync is a small part of a step: its rule
  runs, and stays below its threshold);
* ``decode``: an inference engine's decode loop: steps that each replay a CUDA graph of 200
  kernels, write the KV cache, and every 16th also prefill; the host schedules some steps
  later than the previous replay ends (the replay-gap, KV-cache and prefill rules run).

For each it prints the load time, then ``advise``'s wall and CPU time (median of
``--repeat`` runs), the steps analysed, the verdict and the findings. A loaded machine
stretches wall time; CPU time is what the process itself spent — say how loaded the
machine was when quoting them.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np
from harness import ROOT, median

from tests.support.tracegen import write_kineto_trace
from tests.support.tracegen.problems import write_problem_trace
from traces.atrace import TraceBuilder, advise, read_trace, write_chrome_trace
from traces.atrace.model.trace import Kind

EVENTS_PER_LAYER_STEP = 43  # events read per layer of one step of a problem trace
STEPS = 20


def prepare(directory: Path, name: str, events: int) -> Path:
    path = directory / f"{name}_{events}.json"
    if not path.exists():
        if name == "synthetic":
            write_kineto_trace(path, int(events * 1.53), seed=1)
        elif name == "decode":
            write_chrome_trace(decode_trace(events), path)
        else:
            layers = max(2, events // (STEPS * EVENTS_PER_LAYER_STEP))
            write_problem_trace(path, name, steps=STEPS, layers=layers, seed=1)
    return path


def decode_trace(events: int):
    """About ``events`` events of a decode loop under graph replays (see the module's notes)."""
    rng = np.random.default_rng(1)
    b = TraceBuilder(source="kineto")
    b.meta.update({"baseTimeNanoseconds": 0})
    host = b.track(100, 100, process_name="python", thread_name="thread 100 (python)")
    dev = b.track(0, 7, process_name="GPU 0", thread_name="stream 7", is_device=True, device=0, stream=7)
    t, free, corr, k = 0, 0, 0, 0
    while b.count < events:
        start = t
        t += int(rng.uniform(700_000, 1_700_000))  # scheduling and sampling: often late
        b.add("sampler.schedule", start, t - start, host, kind=Kind.HOST_OP, cat="cpu_op")
        if k % 16 == 0:
            corr += 1
            b.add("cudaLaunchKernel", t, 4000, host, kind=Kind.RUNTIME, cat="cuda_runtime", corr=corr,
                  args={"correlation": corr})
            s = max(t + 6000, free)
            b.add("prefill_attention_kernel", s, 400_000, dev, kind=Kind.KERNEL, cat="kernel", corr=corr,
                  args={"correlation": corr})
            b.add("prefill", t - 1000, 6000, host, kind=Kind.ANNOTATION, cat="user_annotation")
            free, t = s + 400_000, t + 6000
        corr += 1
        b.add("cudaGraphLaunch", t, 10_000, host, kind=Kind.RUNTIME, cat="cuda_runtime", corr=corr,
              args={"correlation": corr})
        s = max(t + 8000, free)
        for j in range(200):
            b.add(f"gemv_kernel_{j % 12}", s, 5000, dev, kind=Kind.KERNEL, cat="kernel", corr=corr,
                  args={"correlation": corr})
            s += 5000
        corr += 1
        b.add("cudaLaunchKernel", t + 12_000, 4000, host, kind=Kind.RUNTIME, cat="cuda_runtime", corr=corr,
              args={"correlation": corr})
        b.add("reshape_and_cache_kernel", s, 60_000, dev, kind=Kind.KERNEL, cat="kernel", corr=corr,
              args={"correlation": corr})
        free, t = s + 60_000, t + 18_000
        b.add("decode", start, t - start, host, kind=Kind.ANNOTATION, cat="user_annotation")
        b.add(f"ProfilerStep#{k}", start, t - start + 1000, host, kind=Kind.ANNOTATION, cat="user_annotation")
        t, k = t + 1000, k + 1
    return b.build()


def measure(path: Path, repeat: int, host_only: bool = False) -> dict:
    t = time.perf_counter()
    trace = read_trace(path)
    load = time.perf_counter() - t
    if host_only:
        trace = trace.take(np.flatnonzero(~trace.on_device))
    walls, cpus = [], []
    for _ in range(repeat):
        trace._cache.clear()  # nothing from a previous run helps the next
        w, c = time.perf_counter(), time.process_time()
        found = advise(trace)
        walls.append(time.perf_counter() - w)
        cpus.append(time.process_time() - c)
    return {"events": len(trace), "load_s": load, "wall_s": median(walls),
            "cpu_s": median(cpus), "found": found}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--events", type=int, default=1_000_000)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--traces", nargs="*", default=["synthetic", "cpu_only", "launch_bound", "host_sync", "decode"])
    args = p.parse_args()
    directory = ROOT / "var" / "bench" / "advise"
    directory.mkdir(parents=True, exist_ok=True)
    load = os.getloadavg()[0]
    print(f"advise at {args.events:,} events ({os.cpu_count()} cores, load average {load:.1f})")
    print(f"{'trace':24s} {'events':>10s} {'load s':>7s} {'advise wall s':>14s} {'advise CPU s':>13s}  steps  verdict / findings")
    for name in args.traces:
        source = "synthetic" if name == "cpu_only" else name
        r = measure(prepare(directory, source, args.events), args.repeat, host_only=name == "cpu_only")
        f = r["found"]
        steps = f"{len(f.scope['windows_analysed'])}/{f.scope['steps'] or 1}"
        rules = ", ".join(f"{x.rule} {x.saving_share:.0%}" for x in f.findings) or "none"
        print(f"{name:24s} {r['events']:>10,} {r['load_s']:7.2f} {r['wall_s']:14.3f} {r['cpu_s']:13.3f}  {steps:>5s}  "
              f"{f.verdict}: {rules}")


if __name__ == "__main__":
    main()
