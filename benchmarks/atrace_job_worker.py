"""The multi-rank figure in its own process: ``python atrace_job_worker.py FOLDER``.

Load every rank, a breakdown per rank, match the collectives and take the critical path
across ranks; prints one JSON line with the times of each part, the total and the peak
resident memory.
"""

from __future__ import annotations

import json
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from traces.atrace import analyse_job, cross_rank_critical_path, operator_breakdown, read_job


def main() -> None:
    t0, c0 = time.perf_counter(), time.process_time()
    traces = read_job(sys.argv[1])
    t1 = time.perf_counter()
    for t in traces:
        operator_breakdown(t)
    t2 = time.perf_counter()
    job = analyse_job(traces)
    cp = cross_rank_critical_path(job)
    t3, c3 = time.perf_counter(), time.process_time()
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({
        "ranks": len(traces), "events": sum(len(t) for t in traces), "collectives": len(job.collectives),
        "rule": job.rule, "load_s": round(t1 - t0, 3), "breakdown_s": round(t2 - t1, 3),
        "cross_rank_path_s": round(t3 - t2, 3), "wall_s": round(t3 - t0, 3), "cpu_s": round(c3 - c0, 3), "peak_mb": round(peak_mb, 1),
        "path_length_us": cp.length_ns / 1000,
    }))


if __name__ == "__main__":
    main()
