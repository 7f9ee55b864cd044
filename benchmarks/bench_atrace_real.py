"""The shared real traces (ASICMON_REAL_TRACES, by default ../shared/data/real-traces): one row per trace.

    python benchmarks/bench_atrace_real.py [--skip-hta]

Columns: events; kernels exact (every per-kernel total equals exact decimal arithmetic on
the raw JSON); communication share of device work; the whole-trace critical path's bound
breakdown; agreement with Holistic Trace Analysis (HTA, run in benchmarks/.venv-hta on a
copy of the file): kernels whose totals agree within HTA's whole-microsecond arithmetic
(its start and end are cut to whole microseconds: up to 2 us per instance; HTA also keeps only
complete ProfilerStep iterations, so traces with a partial step differ more), and HTA's
communication share (of its time-based kernel-type split, overlaps included).
"""

from __future__ import annotations

import argparse
import gzip
import json
import shutil
import subprocess
import tempfile
from collections import defaultdict
from decimal import ROUND_HALF_EVEN, Decimal
from pathlib import Path

from harness import HERE

from tests.support.traces import REAL_TRACES as REAL  # (ASICMON_REAL_TRACES)
from traces.atrace import communication, critical_path, read_trace
from traces.atrace.model.trace import DEVICE_KINDS


def _read(path: Path) -> bytes:
    return gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()


def exact_kernel_totals(path: Path) -> dict[str, tuple[int, int]]:
    """{name: (count, total ns)} of device work (kernel, copy, fill), by decimal arithmetic."""
    doc = json.loads(_read(path), parse_float=Decimal)
    out: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for e in doc.get("traceEvents", []) if isinstance(doc, dict) else doc:
        if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset", "mtia_ccp_events"):
            row = out[e["name"]]
            row[0] += 1
            row[1] += int((Decimal(e["dur"]) * 1000).to_integral_value(rounding=ROUND_HALF_EVEN))
    return {k: (v[0], v[1]) for k, v in out.items()}


def exact_totals_in_hta_scope(path: Path) -> dict[str, tuple[int, int]]:
    """As exact_kernel_totals, over the device work HTA's TraceAnalysis keeps: with more than
    one ProfilerStep, only work launched (same correlation) from a host event that starts
    before the last ProfilerStep starts (HTA's _filter_irrelevant_gpu_kernels)."""
    doc = json.loads(_read(path), parse_float=Decimal)
    events = [e for e in (doc.get("traceEvents", []) if isinstance(doc, dict) else doc) if e.get("ph") == "X"]
    device = [e for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset", "mtia_ccp_events")]
    host = [e for e in events if e.get("cat") not in ("kernel", "gpu_memcpy", "gpu_memset", "mtia_ccp_events")]
    host = [e for e in host if not str(e.get("cat", "")).startswith("gpu_")]  # not device-side annotations
    steps = [e for e in host if str(e.get("name", "")).startswith("ProfilerStep")]
    if len({e["name"] for e in steps}) > 1:  # HTA counts distinct ProfilerStep names
        last = max(Decimal(e["ts"]) for e in steps)
        launched = {e["args"]["correlation"] for e in host
                    if "correlation" in e.get("args", {}) and Decimal(e["ts"]) < last}
        device = [e for e in device if e.get("args", {}).get("correlation") in launched]
    out: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for e in device:
        out[e["name"]][0] += 1
        out[e["name"]][1] += int((Decimal(e["dur"]) * 1000).to_integral_value(rounding=ROUND_HALF_EVEN))
    return {k: (v[0], v[1]) for k, v in out.items()}


def agreeing(ours: dict[str, tuple[int, int]], hta_kernels: dict[str, float]) -> tuple[int, int]:
    """Kernels whose totals agree within HTA's whole-microsecond arithmetic (2 µs an instance)."""
    shared = [k for k in ours if k in hta_kernels]
    agree = sum(1 for k in shared if abs(hta_kernels[k] - ours[k][1] / 1000) <= 2 * ours[k][0] + 1e-6)
    return agree, len(shared)


def engine_kernel_totals(trace) -> dict[str, tuple[int, int]]:
    import numpy as np

    dev = np.flatnonzero(trace.on_device & trace.kind_mask(*DEVICE_KINDS))
    out: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for name, dur in zip(trace.names(dev), trace.dur[dev].tolist()):
        out[name][0] += 1
        out[name][1] += dur
    return {k: (v[0], v[1]) for k, v in out.items()}


def hta_figures(path: Path) -> dict | None:
    python = HERE / ".venv-hta" / "bin" / "python"
    if not python.exists():
        return None
    with tempfile.TemporaryDirectory() as tmp:
        shutil.copy(path, Path(tmp) / path.name)
        proc = subprocess.run([str(python), str(HERE / "atrace_hta_kernels.py"), tmp],
                              capture_output=True, text=True, timeout=600)
    lines = [x for x in proc.stdout.splitlines() if x.startswith("{")]
    return json.loads(lines[-1]) if proc.returncode == 0 and lines else {"error": proc.stderr.strip()[-200:]}


def row(path: Path, with_hta: bool) -> dict:
    trace = read_trace(path)
    ours = engine_kernel_totals(trace)
    exact = exact_kernel_totals(path)
    comm = communication(trace)["split"]["communication"]["share"]
    cp = critical_path(trace).to_dict(max_steps=0)
    out = {"trace": path.name.split(".")[0], "events": len(trace),
           "kernels_exact": "yes" if all(ours.get(k, (0, 0))[1] == v[1] for k, v in exact.items()) else "no",
           "comm_share": comm, "bounds": cp["bound_shares"], "bound": cp["bound"]}
    hta = hta_figures(path) if with_hta and exact else None
    if hta and "error" not in hta:
        agree, shared = agreeing(ours, hta["kernels"])
        in_scope, scoped = agreeing(exact_totals_in_hta_scope(path), hta["kernels"])
        types = hta["types"]
        total = sum(types.values()) or 1
        comm = sum(v for k, v in types.items() if k.startswith("COMMUNICATION")) / total
        out["hta"] = (f"{agree}/{shared} kernel totals agree ({in_scope}/{scoped} over the work HTA keeps); "
                      f"HTA comm {comm * 100:.1f}%")
    elif hta:
        out["hta"] = "HTA failed: " + hta["error"].splitlines()[-1][:60] if hta["error"] else "HTA failed"
    else:
        out["hta"] = "-" if exact else "no device work"
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--skip-hta", action="store_true")
    args = parser.parse_args()
    rows = []
    for path in sorted(REAL.glob("*.json*")):
        if b'"traceEvents"' not in _read(path)[: 1 << 16]:
            continue
        rows.append(row(path, not args.skip_hta))
        r = rows[-1]
        bounds = ", ".join(f"{k.replace('_', ' ')} {v * 100:.0f}%" for k, v in r["bounds"].items() if v >= 0.005)
        print(f"| {r['trace']} | {r['events']:,} | {r['kernels_exact']} | {r['comm_share'] * 100:.1f}% | "
              f"{bounds} | {r['hta']} |", flush=True)


if __name__ == "__main__":
    main()
