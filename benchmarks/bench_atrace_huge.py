"""A trace larger than memory should be: about 5 GB of Kineto JSON analysed end to end.

    python benchmarks/bench_atrace_huge.py [--events 18000000] [--workers 2] [--json out.json]

Generates (once, under benchmarks/out/) a Kineto trace of the realistic shape
(tests.support.tracegen, 282 bytes an event: 18M events are about 5 GB), then in a fresh
process loads it, takes the operator breakdown and the whole-trace critical path, and
computes and saves every stored view of the trace page (traces/store/page_limits.py's limits),
printing each step's wall and CPU time and the peak resident memory after it, against the
file's size (the target: peak <= 1.5x the file). The load streams the file (two processes,
each reading its own batches) and never holds its text; the stored page data go to a
temporary folder. Not part of `make test`: it takes minutes and needs disk and memory.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from harness import HERE, ROOT, load_average, peak_rss_mb


def trace_for(events: int) -> Path:
    from tests.support.tracegen import write_kineto_trace

    path = HERE / "out" / f"huge_{events}" / "trace.json"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        t = time.perf_counter()
        part = path.with_suffix(".part")
        count = write_kineto_trace(part, events, seed=events, steps=max(20, events // 100_000))
        part.rename(path)
        print(f"generated {path} ({count:,} events, {path.stat().st_size / 1e9:.2f} GB) "
              f"in {time.perf_counter() - t:.0f} s", flush=True)
    return path


def _peak_mb() -> float:
    return peak_rss_mb()


def _children_peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024


def run(path: Path, workers: int) -> dict:
    """The steps, in this process; one dict of figures."""
    from traces.atrace import critical_path, operator_breakdown, read_trace
    from traces.atrace.render.page_data import compute_page_data
    from traces.store import page_limits

    size_mb = path.stat().st_size / 1e6
    steps = {}

    def step(name, fn):
        t, c = time.perf_counter(), time.process_time()
        out = fn()
        steps[name] = {"wall_s": round(time.perf_counter() - t, 2), "cpu_s": round(time.process_time() - c, 2),
                       "peak_mb": round(_peak_mb()), "children_peak_mb": round(_children_peak_mb())}
        print(f"  {name:28} {steps[name]['wall_s']:8.1f} s wall {steps[name]['cpu_s']:8.1f} s CPU   "
              f"peak {steps[name]['peak_mb']:,} MB (child {steps[name]['children_peak_mb']:,} MB)", flush=True)
        return out

    trace = step("load", lambda: read_trace(path, workers=workers))
    bd = step("breakdown", lambda: operator_breakdown(trace))
    cp = step("critical path (whole trace)", lambda: critical_path(trace))
    with tempfile.TemporaryDirectory() as tmp:
        data = step("page data (computed)", lambda: compute_page_data(trace, page_limits.STORED, breakdown=bd,
                                                                      path=cp))
        files = step("page data (saved)", lambda: data.save(tmp))
        stored_mb = sum((Path(tmp) / f).stat().st_size for f in files) / 1e6
    total = {k: round(sum(s[k] for s in steps.values()), 1) for k in ("wall_s", "cpu_s")}
    peak = max(_peak_mb(), _children_peak_mb())
    return {"events": len(trace), "file_mb": round(size_mb), "steps": steps, "total": total,
            "peak_mb": round(peak), "peak_over_file": round(peak / size_mb, 2), "stored_mb": round(stored_mb),
            "path_length_us": cp.length_ns / 1000, "load_average": os.getloadavg()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=18_000_000)
    parser.add_argument("--workers", type=int, default=2, help="processes for the load (1 or 2)")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument("--in-process", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.in_process:
        print(json.dumps(run(args.in_process, args.workers)))
        return
    path = trace_for(args.events)
    print(f"{path.stat().st_size / 1e9:.2f} GB trace, load average {load_average()}; "
          f"each step in one fresh process (peak: resident memory so far)", flush=True)
    proc = subprocess.run([sys.executable, __file__, "--in-process", str(path), "--workers", str(args.workers)],
                          stdout=subprocess.PIPE, text=True, cwd=ROOT)
    lines = [x for x in proc.stdout.splitlines() if x.startswith("{")]
    for x in proc.stdout.splitlines():
        if not x.startswith("{"):
            print(x)
    if proc.returncode or not lines:
        raise SystemExit(f"the run failed (exit {proc.returncode})")
    res = json.loads(lines[-1])
    print(f"total {res['total']['wall_s']:.0f} s wall, {res['total']['cpu_s']:.0f} s CPU; {res['events']:,} events; "
          f"peak {res['peak_mb']:,} MB = {res['peak_over_file']:.2f}x the file (target <= 1.5x); "
          f"page data stored: {res['stored_mb']} MB")
    if args.json:
        args.json.write_text(json.dumps(res, indent=2))


if __name__ == "__main__":
    main()
