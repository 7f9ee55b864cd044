"""Performance models fitted from the shared real traces (ASICMON_REAL_TRACES).

    python benchmarks/bench_perf_fit.py

1. Per trace: a model fitted on its kernels (every fifth held out), the median absolute
   error of predicted kernel times on the held-out kernels, overall and per operator class
   (held-out count in brackets), and the fit's time (reading the trace not included; best
   of 5). Beside it, ``halves``: the error of a model fitted on the first half of the
   trace's kernels (in start order) on the second half, a split that keeps a kernel's
   neighbours in time out of its fit.
2. Per fitted trace, each operator class's share of device kernel time: in the real trace;
   in the same kernels as the fitted model predicts them; in a synthetic trace of the
   emulated ``gpu`` type running its own workload (a BERT-base encoder block) with the
   fitted model written into a copy of its spec; and of that type without a model.
3. One fit over the four vendor traces together, and its time.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from emulator.perf import model as perf_model  # noqa: E402
from emulator.workloads.graph import WORKLOADS  # noqa: E402
from emulator.workloads.tracing import capture  # noqa: E402
from fleet.asimov.loader import SPECS_DIR  # noqa: E402
from fleet.asimov.performance import with_performance  # noqa: E402
from tests.support.traces import REAL_TRACES as REAL  # noqa: E402  (ASICMON_REAL_TRACES)
from traces.atrace import read_trace  # noqa: E402
from traces.atrace.analysis.kernel_model import (  # noqa: E402
    MODEL_FORM,
    fit,
    fit_traces,
    kernels_of,
    predict,
    predict_trace,
)
from traces.atrace.analysis.kernel_sizes import OP_CLASSES  # noqa: E402

VENDOR = {
    "a100_alexnet_train": "NVIDIA A100", "h100_bert_infer": "NVIDIA H100",
    "mi250_minitoy_train": "AMD MI250", "mi300_qwen_infer": "AMD MI300X",
}
OTHERS = {"ddp_nccl_rank0": "2-rank DDP (NCCL)", "multirank_sampled_rank0": "sampled rank", "mtia_rank0": "Meta MTIA"}
BOUND = 0.15


def pct(v: float | None) -> str:
    return "   -  " if v is None else f"{100 * v:5.1f}%"


def per_trace(traces: dict) -> None:
    print(f"model: {MODEL_FORM}\n")
    print(f"{'trace':26s}{'device':20s}{'kernels':>8s}{'sized':>7s}{'held':>6s}{'error':>8s}{'halves':>8s}"
          f"{'fit ms':>8s}  per class")
    for name, tr in traces.items():
        k = kernels_of(tr)
        best = min((fit_traces({name: tr}) for _ in range(5)), key=lambda r: r.fit_s)
        t = best.per_trace[name]
        sized = sum(1 for f in k.bytes if f == f) / max(len(k), 1)
        classes = "  ".join(f"{c} {pct(e['error']).strip()} ({e['held_out']})" for c, e in t["per_class"].items())
        label = VENDOR.get(name) or OTHERS.get(name, "")
        flag = "" if t["error"] is not None and t["error"] <= BOUND else "  > 15 %"
        print(f"{name:26s}{label:20s}{len(k):8d}{sized:7.0%}{t['held_out']:6d}{pct(t['error']):>8s}"
              f"{pct(halves_error(k)):>8s}{best.fit_s * 1000:8.1f}  {classes}{flag}")


def halves_error(k) -> float | None:
    """Median absolute error on the second half of the kernels of a model fitted on the first."""
    first = np.arange(len(k)) < len(k) // 2
    later = k.take(~first)
    pred = predict(fit(k.take(first)), later)
    ok = np.isfinite(pred)
    return float(np.median(np.abs(pred[ok] - later.dur_us[ok]) / later.dur_us[ok])) if ok.any() else None


def emulated_shares(seconds: float = 0.2) -> dict[str, float]:
    trace = capture("gpu", seconds, seed=1)
    nodes = {n.name: n for n in WORKLOADS["transformer"].nodes}
    total: dict[str, float] = defaultdict(float)
    for i in range(len(trace)):
        e = trace.event(i)
        node = nodes.get(e["name"])
        if node is not None and e["kind"] in ("kernel", "memcpy"):
            total[perf_model.op_class(node.op_type, node.kind)] += e["dur_us"]
    s = sum(total.values())
    return {c: v / s for c, v in total.items()}


def real_shares(trace) -> dict[str, float]:
    k = kernels_of(trace)
    s = float(k.dur_us.sum())
    return {c: float(k.dur_us[k.cls == c].sum()) / s for c in OP_CLASSES if (k.cls == c).any()}


def synthetic_vs_real(traces: dict) -> None:
    print("\nDevice kernel time per operator class: real trace | the trace's kernels as its model predicts "
          "them | emulated gpu with that model | emulated gpu without a model")
    os.environ.pop("ASIMOV_SPEC_DIRS", None)
    perf_model.forget()
    plain = emulated_shares()
    with tempfile.TemporaryDirectory() as tmp:
        spec = Path(tmp) / "gpu.asimov"
        shutil.copy(SPECS_DIR / "gpu.asimov", spec)
        os.environ["ASIMOV_SPEC_DIRS"] = tmp
        for name, tr in traces.items():
            report = fit_traces({name: tr})
            spec.write_text(with_performance((SPECS_DIR / "gpu.asimov").read_text(), report.model, name))
            perf_model.forget()
            started = time.perf_counter()
            fitted = emulated_shares()
            took = time.perf_counter() - started
            real = real_shares(tr)
            rows = predict_trace(tr, report.model)
            whole = sum(r["predicted_us"] or 0.0 for r in rows.values())
            modelled = {c: (r["predicted_us"] or 0.0) / whole for c, r in rows.items()}
            print(f"  {name} (emulated 0.2 s in {took:.2f} s)")
            for c in OP_CLASSES:
                if c in real or c in fitted or c in plain:
                    print(f"    {c:14s}{pct(real.get(c)):>8s} |{pct(modelled.get(c)):>8s} |{pct(fitted.get(c)):>8s} "
                          f"|{pct(plain.get(c)):>8s}")
        os.environ.pop("ASIMOV_SPEC_DIRS")
        perf_model.forget()


def pooled(traces: dict) -> None:
    vendor = {n: t for n, t in traces.items() if n in VENDOR}
    best = min((fit_traces(vendor) for _ in range(3)), key=lambda r: r.fit_s)
    n = sum(t["kernels"] for t in best.per_trace.values())
    print(f"\nOne fit over {len(vendor)} vendor traces ({n} kernels): {best.fit_s * 1000:.0f} ms, "
          f"held-out error {pct(best.error).strip()} (mixing devices: a figure of the fit's cost, not of a device)")


def main() -> None:
    names = [*VENDOR, *OTHERS]
    started = time.perf_counter()
    traces = {n: read_trace(REAL / f"{n}.json.gz") for n in names}
    print(f"read {len(traces)} traces in {time.perf_counter() - started:.2f} s (not counted in fit times)\n")
    per_trace(traces)
    synthetic_vs_real({n: traces[n] for n in VENDOR})
    pooled(traces)


if __name__ == "__main__":
    main()
