"""Per-kernel totals by Holistic Trace Analysis (run with the HTA virtualenv).

``python atrace_hta_kernels.py TRACE_DIR`` prints one JSON line: ``kernels`` {name: sum us}
and ``types`` {COMPUTATION / COMMUNICATION / MEMORY: sum us} from HTA's GPU kernel breakdown.
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
    types, metrics = analyzer.get_gpu_kernel_breakdown(visualize=False, num_kernels=1_000_000, duration_ratio=1.0,
                                                       include_memory_kernels=True)
    kernels: dict[str, float] = {}
    for _, row in metrics.iterrows():
        kernels[str(row["name"])] = kernels.get(str(row["name"]), 0.0) + float(row["sum (us)"])
    print(json.dumps({"kernels": kernels,
                      "types": {str(r["kernel_type"]): float(r["sum"]) for _, r in types.iterrows()}}))


if __name__ == "__main__":
    main()
