"""Performance models fitted from the shared real traces (ASICMON_REAL_TRACES).

    python benchmarks/bench_perf_fit.py

    python benchmarks/bench_perf_fit.py --all    # with the emulated shares (2.)

1. Per trace: a model fitted on its kernels (every fifth held out; each kernel in turn,
   leave-one-out, when the trace has fewer than fifty), the median absolute
   error of predicted kernel times on the held-out kernels, overall and per operator class
   (held-out count in brackets), and the fit's time (reading the trace not included; best
   of 3). Beside it ``curves``: the same held-out kernels by the class curves alone (no
   family); ``medians``: by the median time of their class in the fit, the baseline that
   knows no size (a trace where the model misses by about as much records nothing that
   tells its kernels apart); and ``by time``: a model fitted on the first half of the trace's kernels (in
   start order) measured on the second half. Which kernels were predicted how, and which
   fell back and why. The verdict: both errors within 15 % on a trace that records shapes
   (25 % otherwise) and no class with 20 or more held-out kernels above 40 %.
   Then across traces: fitted on one rank of a job, measured on the other.
2. With ``--all``, per fitted trace, each operator class's share of device kernel time: in the real trace;
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
from harness import Stopwatch

from emulator.perf import model as perf_model
from emulator.workloads.graph import WORKLOADS
from emulator.workloads.tracing import capture
from fleet.asimov.loader import SPECS_DIR
from fleet.asimov.performance import with_performance
from tests.support.traces import REAL_TRACES as REAL  # (ASICMON_REAL_TRACES)
from traces.atrace import read_trace
from traces.atrace.analysis.kernel_model import (
    FALLBACK_WHY,
    MODEL_FORM,
    fit,
    fit_detail,
    kernels_of,
    predict_how,
    predict_trace,
)
from traces.atrace.analysis.kernel_scoring import fit_traces
from traces.atrace.analysis.kernel_sizes import OP_CLASSES
from traces.atrace.model.trace import Kind

VENDOR = {
    "a100_alexnet_train": "NVIDIA A100", "h100_bert_infer": "NVIDIA H100",
    "mi250_minitoy_train": "AMD MI250", "mi300_qwen_infer": "AMD MI300X",
}
OTHERS = {
    "torch_compile_triton": "torch.compile/Triton", "ddp_nccl_rank0": "2-rank DDP (NCCL)",
    "multirank_sampled_rank0": "sampled rank 0", "multirank_sampled_rank1": "sampled rank 1",
    "sglang_qwen3_prefilldecode": "SGLang Qwen3 (ROCm)", "vllm_prefilldecode_piecewise": "vLLM graphs (ROCm)",
    "mtia_rank0": "Meta MTIA",
}
# Cross-trace checks: a model fitted on one trace, measured on every kernel of another of the
# same device type and job.
ACROSS = [("multirank_sampled_rank0", "multirank_sampled_rank1"), ("multirank_sampled_rank1", "multirank_sampled_rank0")]
SHAPED = 0.5  # a trace "records shapes" when at least half of its CPU operators give them
BOUND_SHAPES, BOUND_OTHER, CLASS_BOUND, CLASS_MIN = 0.15, 0.25, 0.40, 20
FEW = 10


def pct(v: float | None) -> str:
    return "   -  " if v is None else f"{100 * v:5.1f}%"


def _classes(per_class: dict) -> str:
    return "  ".join(f"{c} {pct(e['error']).strip()} ({e['held_out']})" for c, e in per_class.items())


def shaped_share(trace) -> float:
    """The share of a trace's CPU operators that recorded their inputs' shapes (``Input Dims``)."""
    ops = np.flatnonzero(~trace.on_device & (trace.kind == Kind.HOST_OP))
    return sum(1 for i in ops.tolist() if (trace.args.get(i) or {}).get("Input Dims")) / max(len(ops), 1)


def per_trace(traces: dict) -> dict[str, dict]:
    """The table: per trace, held-out error by kernel and by time, per class, fallbacks."""
    print(f"model: {MODEL_FORM}, then each kernel family's efficiency curve\n")
    print(f"{'trace':29s}{'device':22s}{'kernels':>8s}{'shapes':>7s}{'held':>6s}{'by kernel':>10s}{'curves':>8s}"
          f"{'medians':>8s}{'by time':>9s}{'fit ms':>8s}  verdict")
    out = {}
    for name, tr in traces.items():
        best = min((fit_traces({name: tr}) for _ in range(3)), key=lambda r: r.fit_s)
        t = best.per_trace[name]
        shapes = shaped_share(tr)
        bound = BOUND_SHAPES if shapes >= SHAPED else BOUND_OTHER
        worst = [(c, e) for split in (t, t["by_time"]) for c, e in split["per_class"].items()
                 if e["held_out"] >= CLASS_MIN and e["error"] is not None and e["error"] > CLASS_BOUND]
        ok = all(v is not None and v <= bound for v in (t["error"], t["by_time"]["error"])) and not worst
        label = VENDOR.get(name) or OTHERS.get(name, "")
        verdict = f"<= {bound:.0%}" if ok else f"MISS (bound {bound:.0%})"
        if t["held_out"] < FEW:
            verdict += f", {t['held_out']} held out: too few for a median"
        print(f"{name:29s}{label:22s}{t['kernels']:8d}{shapes:7.0%}{t['held_out']:6d}{pct(t['error']):>10s}"
              f"{pct(t['curves_only']):>8s}{pct(t['class_medians']):>8s}{pct(t['by_time']['error']):>9s}"
              f"{best.fit_s * 1000:8.1f}  {verdict}")
        print(f"    held out: {t['scheme']}; by time: {t['by_time']['scheme']}")
        print(f"    by kernel: {_classes(t['per_class'])}")
        print(f"    by time:   {_classes(t['by_time']['per_class'])}")
        news = [(label, split["new_sizes"]) for label, split in (("by kernel", t), ("by time", t["by_time"]))]
        print("    sizes the fit never saw in their family: " + "; ".join(
            f"{label} {pct(e['error']).strip()} ({e['held_out']})" for label, e in news))
        how = ", ".join(f"{h} {n}" for h, n in t["how"].items())
        print(f"    predicted by: {how}")
        for h, n in t["fallbacks"].items():
            print(f"    fell back ({n}): {h}: {FALLBACK_WHY[h]}")
        out[name] = t | {"shapes": shapes, "ok": ok}
    return out


def across(traces: dict) -> None:
    print("\nAcross traces of one job (fitted on one, every kernel of the other predicted):")
    for a, b in ACROSS:
        if a in traces and b in traces:
            k = kernels_of(traces[b])
            model = fit(kernels_of(traces[a]))
            detail = fit_detail(model, kernels_of(traces[a]))
            pred, how = predict_how(model, k, detail)
            ok = np.isfinite(pred)
            err = float(np.median(np.abs(pred[ok] - k.dur_us[ok]) / k.dur_us[ok]))
            per = {c: float(np.median(np.abs(pred[m] - k.dur_us[m]) / k.dur_us[m]))
                   for c in OP_CLASSES if (m := (k.cls == c) & ok).sum()}
            print(f"  {a} -> {b}: {pct(err).strip()} on {int(ok.sum())} kernels; "
                  + "  ".join(f"{c} {pct(v).strip()}" for c, v in per.items()))


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
    with Stopwatch() as watch:
        traces = {n: read_trace(REAL / f"{n}.json.gz") for n in names}
    print(f"read {len(traces)} traces in {watch.wall:.2f} s (not counted in fit times)\n")
    per_trace(traces)
    across(traces)
    if "--all" in sys.argv:
        synthetic_vs_real({n: traces[n] for n in VENDOR})
    pooled(traces)


if __name__ == "__main__":
    main()
