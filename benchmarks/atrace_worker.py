"""One timed Asicmon step in its own process: ``python atrace_worker.py STEP TRACE``.

Prints one JSON line: the step's wall and CPU time (load excluded, except for the loads and
'all') and the process's peak resident memory. Steps: ``load`` (as read_trace chooses: two
processes for a large plain file), ``load_1core`` (one process), ``orjson`` (the baseline:
``orjson.loads`` of the whole file into Python objects), the breakdowns, the critical paths
and ``all``. A load also reports the trace's own memory (its columns, args and edges) and
the load's peak over it: the resident memory the load added, this process's and the child's.
"""

from __future__ import annotations

import json
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import orjson

from traces.atrace import critical_path, operator_breakdown, read_trace


def _rss_mb() -> float:
    return int(Path("/proc/self/statm").read_text().split()[1]) * resource.getpagesize() / 2**20


def _peak_mb(who=resource.RUSAGE_SELF) -> float:
    return resource.getrusage(who).ru_maxrss / 1024


def own_mb(trace) -> float:
    """The trace's own memory: its columns, edges, arg offsets, cached arrays (ends, device
    flags) and the args' text."""
    cols = [trace.name, trace.cat, trace.op, trace.kind, trace.ph, trace.ts, trace.dur, trace.track, trace.corr,
            trace.ext, trace.flags, trace.edge_src, trace.edge_dst, trace.edge_kind, trace.args.offsets]
    cached = [a for v in trace._cache.values() for a in (v if isinstance(v, tuple) else (v,))]
    return (sum(c.nbytes for c in cols + cached) + len(trace.args.blob)) / 2**20


def main() -> None:
    step, path = sys.argv[1], sys.argv[2]
    info: dict = {}
    before = _rss_mb()
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0, c0 = time.perf_counter(), time.process_time()
    if step == "orjson":
        doc = orjson.loads(Path(path).read_bytes())
        info["events"] = len(doc["traceEvents"])
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        print(json.dumps({"wall_s": round(wall, 3), "cpu_s": round(cpu, 3), "peak_mb": round(_peak_mb(), 1), **info}))
        return
    trace = read_trace(path, workers=1 if step == "load_1core" else None)
    t1, c1 = time.perf_counter(), time.process_time()
    info["events"] = len(trace)
    if step in ("load", "load_1core"):
        done = resource.getrusage(resource.RUSAGE_CHILDREN)  # a second process's CPU counts too
        wall = t1 - t0
        cpu = c1 - c0 + (done.ru_utime + done.ru_stime) - (kids.ru_utime + kids.ru_stime)
        own = own_mb(trace)
        added = max(_peak_mb() - before, _peak_mb(resource.RUSAGE_CHILDREN))
        info.update(own_mb=round(own, 1), added_mb=round(added, 1), peak_over_own=round(added / own, 2),
                    child_peak_mb=round(_peak_mb(resource.RUSAGE_CHILDREN), 1))
    elif step in ("breakdown", "breakdown_device", "breakdown_host"):
        side = {"breakdown": None, "breakdown_device": "device", "breakdown_host": "host"}[step]
        bd = operator_breakdown(trace, side=side)
        info["ops"] = len(bd.keys)
        wall, cpu = time.perf_counter() - t1, time.process_time() - c1
    elif step == "cp_step":
        cp = critical_path(trace, step=1)
        info["length_us"] = cp.length_ns / 1000
        wall, cpu = time.perf_counter() - t1, time.process_time() - c1
    elif step == "cp_whole":
        cp = critical_path(trace)
        info["length_us"] = cp.length_ns / 1000
        wall, cpu = time.perf_counter() - t1, time.process_time() - c1
    elif step == "all":  # load + breakdown + whole-trace critical path
        operator_breakdown(trace)
        critical_path(trace)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    else:
        raise SystemExit(f"unknown step {step}")
    print(json.dumps({"wall_s": round(wall, 3), "cpu_s": round(cpu, 3), "peak_mb": round(_peak_mb(), 1), **info}))


if __name__ == "__main__":
    main()
