"""Inputs for the job benchmarks: an emulated data-parallel job's per-rank Kineto files.

    python benchmarks/job_inputs.py [--ranks 64] [--events 125000] [--out var/bench/jobs]

The job runs on GPU-like devices of an emulated fleet (8 a host), one of them overheating,
for as long as it takes every rank to record about ``--events`` events; each rank's trace
is written as gzipped Kineto JSON, as PyTorch's profiler writes one file per rank. The
files are kept and reused while the parameters are the same (generating 64 x 125k events
takes minutes).
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from harness import ROOT

from emulator import EmulatedHost, FleetConfig
from emulator.workloads.jobs import JobRun, emulated_conditions, make_job, select_devices
from traces.atrace import write_chrome_trace

T0 = 1_700_000_000.0
EVENTS_PER_STEP = 111  # a data-parallel transformer step on a GPU-like device, every rank
STEP_S = 0.135  # its length on healthy devices
BATCH = 8  # ranks recorded per pass


def job_files(ranks: int, events: int, out: Path, *, straggler: int | None = 5) -> list[Path]:
    """The rank files of the job (generated once, then reused)."""
    folder = out / (f"dp{ranks}x{events}" + ("" if straggler is None else f"-slow{straggler}"))
    files = [folder / f"train_rank{r}.json.gz" for r in range(ranks)]
    if all(f.exists() for f in files):
        return files
    folder.mkdir(parents=True, exist_ok=True)
    fleet = FleetConfig(seed=3, hosts=-(-ranks // 8), devices_per_host=8, types=("gpu",))
    spec = make_job("train", select_devices(fleet)[:ranks])
    spec = dataclasses.replace(spec, ranks=tuple(dataclasses.replace(r, sw_version="2.0") for r in spec.ranks))
    duration = events / EVENTS_PER_STEP * STEP_S * 3  # long enough even for a slow straggler
    started = time.perf_counter()
    # A rank's events take memory until it is written: record a few ranks at a time. Every
    # pass replays the same job (same seed, same devices), so the ranks line up.
    for first in range(0, ranks, BATCH):
        batch = list(range(first, min(first + BATCH, ranks)))
        hosts = {h: EmulatedHost(fleet, h) for h in spec.hosts}
        for h in hosts.values():
            h.sync(T0 - 900)
        for r in spec.ranks:
            hosts[r.host].occupy(r.serial, T0 + duration + 60)
        if straggler is not None:
            hosts[spec.ranks[straggler].host].inject_fault(spec.ranks[straggler].serial, "overheat")
        run = JobRun(spec, emulated_conditions(hosts), start_s=T0, duration_s=duration, seed=1,
                     traced=batch, max_events=events)
        while run.cursor < run.end_ns and run.step() and run.recording:
            pass  # until the batch's ranks hold their events
        capture = run.finish()
        with ProcessPoolExecutor(2) as pool:
            list(pool.map(_write, [(capture.traces[r], files[r]) for r in batch]))
        print(f"  ranks {batch[0]}-{batch[-1]}: {capture.steps_kept} steps, {time.perf_counter() - started:.0f} s")
    return files


def _write(item) -> None:
    trace, path = item
    write_chrome_trace(trace, path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=64)
    parser.add_argument("--events", type=int, default=125_000)
    parser.add_argument("--out", type=Path, default=ROOT / "var" / "bench" / "jobs")
    args = parser.parse_args()
    files = job_files(args.ranks, args.events, args.out)
    print(f"{len(files)} files in {files[0].parent}, {sum(f.stat().st_size for f in files) / 1e6:.0f} MB")


if __name__ == "__main__":
    main()
