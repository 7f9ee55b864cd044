"""Atrace against Holistic Trace Analysis (HTA) on the same Kineto traces.

    python benchmarks/bench_atrace.py [--sizes 10000 100000 1000000] [--shapes kineto compact] [--skip-hta]

Generates Kineto-format GPU training traces (tests.support.tracegen) of about each size
and each shape under benchmarks/out/: ``kineto``, the shape of recent PyTorch traces (three-
decimal times on every event, ac2g and fwdbwd flows, stacks five deep, recorded shapes and
kernel args: the headline), and ``compact``, the shape this benchmark used before. Then it
times each step in a fresh process (so peak memory, read from ru_maxrss, belongs to that
step; a step under 2 s runs three times, on both sides, and the fastest run counts): load
(two processes for a large file, as read_trace chooses, and one), ``orjson.loads`` of the
same file as a baseline; operator breakdown (Asicmon does host operators with self time and
device kernels in one pass; HTA's kernel breakdown and its CPU-operator breakdown with self
time are timed separately); the critical path of one step and of the whole trace; then the
multi-rank figure (8 ranks x 125k events: load, breakdown per rank, collective matching and
the critical path across ranks). For the largest size it prints the targets of issue 21
against the figures. HTA runs in its own virtualenv (benchmarks/.venv-hta, created on first
use with holistictraceanalysis 0.5.0 and pandas<3); it is never a dependency of the project.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from harness import HERE, OUT, hta_python, load_average, run_json

ASICMON_STEPS = ["load", "load_1core", "orjson", "breakdown_device", "breakdown_host", "breakdown", "cp_step",
                 "cp_whole", "all"]
HTA_STEPS = ["load", "kernel_breakdown", "cpu_breakdown", "cp_step", "cp_whole"]
# Rows of the table: (label, Asicmon step, HTA step).
ROWS = [
    ("load", "load", "load"),
    ("load, one process", "load_1core", "load"),
    ("orjson.loads of the file (baseline)", "orjson", None),
    ("kernel breakdown", "breakdown_device", "kernel_breakdown"),
    ("CPU-op breakdown with self time", "breakdown_host", "cpu_breakdown"),
    ("breakdown, host and device together", "breakdown", None),
    ("critical path, one step", "cp_step", "cp_step"),
    ("critical path, whole trace", "cp_whole", "cp_whole"),
    ("load + breakdown + whole critical path", "all", None),
]


def trace_for(n: int, shape: str = "kineto") -> Path:
    from tests.support.tracegen import write_kineto_trace

    folder = OUT / f"{shape}_{n}"
    path = folder / "rank0.trace.json"
    if not path.exists():
        folder.mkdir(parents=True, exist_ok=True)
        count = write_kineto_trace(path, n, seed=n, shape=shape)
        print(f"generated {path} ({count:,} events, {path.stat().st_size / 1e6:.0f} MB)", flush=True)
    return path


def job_for(ranks: int, per_rank: int) -> Path:
    """A generated job: ``ranks`` rank files of about ``per_rank`` events, rank 3 a straggler."""
    from tests.support.tracegen import write_kineto_trace

    folder = OUT / f"job_{ranks}x{per_rank}"
    if not (folder / f"rank{ranks - 1}.trace.json").exists():
        folder.mkdir(parents=True, exist_ok=True)
        for r in range(ranks):
            write_kineto_trace(folder / f"rank{r}.trace.json", per_rank, seed=100 + r, rank=r, world_size=ranks,
                               collective_args=True, straggle_us=200.0 if r == 3 else 0.0)
        print(f"generated {folder} ({ranks} ranks x {per_rank:,} events)", flush=True)
    return folder


def run_job(ranks: int, per_rank: int, timeout: int) -> None:
    folder = job_for(ranks, per_rank)
    r = run_step(Path(sys.executable), "atrace_job_worker.py", None, folder, timeout)
    print(f"\nMulti-rank: {ranks} ranks x {per_rank:,} events (target: <= 10 s, <= 2 GB); load average {load_average()}")
    if "error" in r:
        print(f"  error: {r['error']}")
        return
    print(f"  load {r['load_s']:.2f} s + breakdown per rank {r['breakdown_s']:.2f} s + "
          f"matching and cross-rank critical path {r['cross_rank_path_s']:.2f} s = {r['wall_s']:.2f} s "
          f"({r['cpu_s']:.2f} s CPU); "
          f"peak {r['peak_mb']:.0f} MB; {r['events']:,} slices, {r['collectives']} collectives matched by {r['rule']}")
    sys.stdout.flush()


def run_step(python: Path, worker: str, step: str | None, target: Path, timeout: int) -> dict:
    """The step in a fresh process; a step under 2 s runs three times (each side alike) and
    the fastest run counts: on a shared machine a short step's wall time is mostly waiting
    for a core."""
    best = _run_once(python, worker, step, target, timeout)
    for _ in range(2):
        if "error" in best or best["wall_s"] >= 2.0:
            break
        again = _run_once(python, worker, step, target, timeout)
        if "error" not in again and again["wall_s"] < best["wall_s"]:
            best = again
    return best


def _run_once(python: Path, worker: str, step: str | None, target: Path, timeout: int) -> dict:
    return run_json([python, HERE / worker, *([step] if step else []), target], timeout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--shapes", nargs="+", default=["kineto", "compact"], choices=["kineto", "compact"])
    parser.add_argument("--skip-hta", action="store_true")
    parser.add_argument("--job", type=int, nargs=2, default=[8, 125_000], metavar=("RANKS", "EVENTS"),
                        help="the multi-rank figure: ranks x events per rank (0 0 skips it)")
    parser.add_argument("--timeout", type=int, default=900)
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument("--hta-from", type=Path, help="reuse HTA figures from an earlier --json file")
    args = parser.parse_args()
    hta = None if args.skip_hta or args.hta_from else hta_python()
    results = {}
    for shape in args.shapes:
        for n in args.sizes:
            path = trace_for(n, shape)
            key = f"{shape} {n}"
            ours = {s: run_step(Path(sys.executable), "atrace_worker.py", s, path, args.timeout) for s in ASICMON_STEPS}
            theirs = {}
            if args.hta_from:
                theirs = json.loads(args.hta_from.read_text()).get(key, {}).get("hta", {})
            elif hta is not None:
                theirs = {s: run_step(hta, "atrace_hta_worker.py", s, path.parent, args.timeout) for s in HTA_STEPS}
            results[key] = {"asicmon": ours, "hta": theirs, "file_mb": round(path.stat().st_size / 1e6, 1)}
            print_table(f"{shape} shape, {n:,}", results[key])
        print_targets(f"{shape} shape, {max(args.sizes):,}", results[f"{shape} {max(args.sizes)}"])
    if args.job[0] > 0:
        run_job(args.job[0], args.job[1], args.timeout)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


def _fmt(r: dict | None, key: str) -> str:
    if r is None:
        return "-"
    if "error" in r:
        return "error"
    return f"{r[key]:.0f}" if key == "peak_mb" else f"{r[key]:.2f}"


def _ratio(a: dict | None, h: dict | None, key: str) -> str:
    if a and h and "error" not in a and "error" not in h and a[key] > 0:
        return f"{h[key] / a[key]:.1f}x"
    return "-"


def print_table(label: str, res: dict) -> None:
    """One row per step: wall time, CPU time and peak memory of each side, and the ratios
    (HTA / Asicmon) of wall time, CPU time and memory."""
    ours, theirs = res["asicmon"], res["hta"]
    events = ours["load"].get("events", "?")
    print(f"\n{label} trace events ({res['file_mb']} MB; {events:,} events after load); load average {load_average()}")
    head = (f"{'step':40} {'Asicmon s':>10} {'cpu s':>7} {'MB':>6} {'HTA s':>8} {'cpu s':>7} {'MB':>6} "
            f"{'speed-up':>9} {'cpu':>6} {'memory':>7}")
    print(head)
    print("-" * len(head))
    for label, ours_step, hta_step in ROWS:
        a = ours.get(ours_step)
        h = theirs.get(hta_step) if hta_step else None
        mem = _ratio(a, h, "peak_mb")
        note = f"  ({h['error']})" if h and "error" in h else ""
        print(f"{label:40} {_fmt(a, 'wall_s'):>10} {_fmt(a, 'cpu_s'):>7} {_fmt(a, 'peak_mb'):>6} "
              f"{_fmt(h, 'wall_s'):>8} {_fmt(h, 'cpu_s'):>7} {_fmt(h, 'peak_mb'):>6} "
              f"{_ratio(a, h, 'wall_s'):>9} {_ratio(a, h, 'cpu_s'):>6} {mem:>7}{note}")
    sys.stdout.flush()


def print_targets(label: str, res: dict) -> None:
    """Issue 21's targets for the largest trace: the figure, the target, met or not."""
    ours, theirs = res["asicmon"], res["hta"]
    load, one, base = ours.get("load", {}), ours.get("load_1core", {}), ours.get("orjson", {})
    if "error" in load or "error" in one:
        return
    rows = [
        ("load, wall", f"{load['wall_s']:.2f} s", "<= 0.7 s", load["wall_s"] <= 0.7),
        ("load, one process, wall", f"{one['wall_s']:.2f} s (CPU {one['cpu_s']:.2f} s)", "-", None),
        ("JSON read per second", f"{res['file_mb'] / load['wall_s']:.0f} MB/s", ">= 300 MB/s",
         res["file_mb"] / load["wall_s"] >= 300),
        ("load against orjson.loads", _share(load, base), "<= 1/5", _below(load, base, 0.2)),
        ("load memory over the trace's own", f"{load['peak_over_own']:.2f}x ({load['added_mb']:.0f} MB for "
         f"{load['own_mb']:.0f} MB)", "<= 1.3x", load["peak_over_own"] <= 1.3),
    ]
    for name, ours_step, hta_step, floor in (("load", "load", "load", 30),
                                              ("kernel breakdown", "breakdown_device", "kernel_breakdown", 25)):
        a, h = ours.get(ours_step), theirs.get(hta_step)
        if a and h and "error" not in a and "error" not in h:
            rows.append((f"{name} against HTA", f"{h['wall_s'] / a['wall_s']:.1f}x", f">= {floor}x",
                         h["wall_s"] / a["wall_s"] >= floor))
    print(f"\nTargets, {label} events (load average {load_average()}):")
    for name, value, target, met in rows:
        verdict = "" if met is None else ("met" if met else "NOT met")
        print(f"  {name:36} {value:>36}   target {target:>11}   {verdict}")
    sys.stdout.flush()


def _share(a: dict, b: dict) -> str:
    return f"{a['wall_s'] / b['wall_s']:.2f} of its time" if b and "error" not in b and b["wall_s"] else "-"


def _below(a: dict, b: dict, share: float) -> bool | None:
    return a["wall_s"] <= share * b["wall_s"] if b and "error" not in b and b["wall_s"] else None


if __name__ == "__main__":
    main()
