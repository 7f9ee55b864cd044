"""HTA's temporal and idle-time breakdowns of one trace folder (run with the HTA virtualenv).

``python advise_hta_worker.py TRACE_DIR`` prints one JSON line: the temporal breakdown of
rank 0 (idle, compute and non-compute time of the device, from its first to its last kernel)
and the idle-time breakdown summed over its streams (host wait, kernel wait, other).
"""

from __future__ import annotations

import json
import logging
import sys
import warnings


def main() -> None:
    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)
    from hta.trace_analysis import TraceAnalysis

    analyzer = TraceAnalysis(trace_dir=sys.argv[1])
    out: dict = {}
    try:
        t = analyzer.get_temporal_breakdown(visualize=False).iloc[0]
        out["temporal"] = {k: float(t[k]) for k in ("idle_time(us)", "compute_time(us)", "non_compute_time(us)",
                                                   "kernel_time(us)", "idle_time_pctg", "compute_time_pctg",
                                                   "non_compute_time_pctg")}
    except Exception as exc:  # HTA cannot break down a trace without device work
        out["temporal_error"] = f"{type(exc).__name__}: {exc}"[:160]
    try:
        got = analyzer.get_idle_time_breakdown(visualize=False, show_idle_interval_stats=False)
        df = got[0] if isinstance(got, tuple) else got
        by = df.groupby("idle_category")["idle_time"].sum()
        total = float(by.sum())
        out["idle"] = {str(k): {"us": float(v), "share": round(float(v) / total, 4) if total else 0.0}
                       for k, v in by.items()}
    except Exception as exc:
        out["idle_error"] = f"{type(exc).__name__}: {exc}"[:160]
    print(json.dumps(out))


if __name__ == "__main__":
    main()
