"""One timed Asicmon step in its own process: ``python atrace_worker.py STEP TRACE``.

Prints one JSON line: the step's wall and CPU time (load excluded, except for 'load' and
'all') and the process's peak resident memory.
"""

from __future__ import annotations

import json
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from traces.atrace import critical_path, operator_breakdown, read_trace  # noqa: E402


def main() -> None:
    step, path = sys.argv[1], sys.argv[2]
    t0, c0 = time.perf_counter(), time.process_time()
    trace = read_trace(path)
    t1, c1 = time.perf_counter(), time.process_time()
    info = {"events": len(trace)}
    if step == "load":
        wall, cpu = t1 - t0, c1 - c0
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
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"wall_s": round(wall, 3), "cpu_s": round(cpu, 3), "peak_mb": round(peak_mb, 1), **info}))


if __name__ == "__main__":
    main()
