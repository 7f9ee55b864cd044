"""One timed Holistic Trace Analysis step in its own process (run with the HTA virtualenv).

``python atrace_hta_worker.py STEP TRACE_DIR`` prints one JSON line like atrace_worker.py.
"""

from __future__ import annotations

import json
import logging
import resource
import sys
import time
import warnings


def main() -> None:
    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)
    step, trace_dir = sys.argv[1], sys.argv[2]
    from hta.trace_analysis import TraceAnalysis

    t0, c0 = time.perf_counter(), time.process_time()
    analyzer = TraceAnalysis(trace_dir=trace_dir)
    t1, c1 = time.perf_counter(), time.process_time()
    info = {}
    if step == "load":
        wall, cpu = t1 - t0, c1 - c0
    elif step == "kernel_breakdown":
        analyzer.get_gpu_kernel_breakdown(visualize=False)
        wall, cpu = time.perf_counter() - t1, time.process_time() - c1
    elif step == "cpu_breakdown":
        # CPU operators with self time: HTA's call graph gives each event its parent; self
        # time is the duration minus the children's, summed per operator with pandas.
        from hta.common.trace_call_graph import CallGraph

        CallGraph(analyzer.t, ranks=[0])
        df = analyzer.t.get_trace(0)
        sym = analyzer.t.symbol_table.get_sym_table()
        cpu = df[df["stream"] < 0] if "stream" in df else df
        children = cpu[cpu["parent"] >= 0].groupby("parent")["dur"].sum()
        self_dur = cpu["dur"] - cpu["index"].map(children).fillna(0)
        cpu = cpu.assign(self_dur=self_dur)
        table = cpu.groupby("name").agg(count=("dur", "size"), total=("dur", "sum"), self_total=("self_dur", "sum"))
        info["ops"] = len(table)
        info["first"] = str(sym[int(table["total"].idxmax())]) if len(table) else ""
        wall, cpu = time.perf_counter() - t1, time.process_time() - c1
    elif step in ("cp_step", "cp_whole"):
        steps = analyzer.t.get_trace(0)
        names = analyzer.t.symbol_table.get_sym_table()
        n_steps = sum(1 for s in names if str(s).startswith("ProfilerStep#"))
        instance = 1 if step == "cp_step" else (0, n_steps - 1)
        del steps
        graph, ok = analyzer.critical_path_analysis(rank=0, annotation="ProfilerStep", instance_id=instance)
        info["ok"] = bool(ok)
        if ok:
            edges = graph.critical_path_edges_set
            info["length_us"] = float(sum(e.weight for e in edges)) if edges else 0.0
        wall, cpu = time.perf_counter() - t1, time.process_time() - c1
    else:
        raise SystemExit(f"unknown step {step}")
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"wall_s": round(wall, 3), "cpu_s": round(cpu, 3), "peak_mb": round(peak_mb, 1), **info}))


if __name__ == "__main__":
    main()
