"""``python -m emulator fit`` and ``python -m emulator whatif``: a device type's performance
model fitted from real traces, written into its spec; a trace's kernels on a fitted type.

The fitting is Atrace's (`traces.atrace.analysis.kernel_model`): a bandwidth--latency curve
per operator class, its error measured on kernels held out of the fit (every fifth; each in
turn when the traces have fewer than fifty kernels). This module reads the traces, prints the model and its errors, and with ``--write`` puts the
model into the type's Asimov spec (checked by compiling the new text before the file is
replaced, so a spec is never left half-written).
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path
from typing import Any

import orjson

from emulator.perf import model as perf_model
from fleet.asimov.compiler import compile_spec
from fleet.asimov.errors import AsimovError, SpecErrors
from fleet.asimov.loader import find_spec
from fleet.asimov.performance import with_performance
from traces.atrace.analysis.kernel_model import FALLBACK_WHY, MODEL_FORM, predict_trace
from traces.atrace.analysis.kernel_scoring import FitReport, fit_traces
from traces.atrace.errors import TraceError
from traces.atrace.io.reader import read_trace

__all__ = ["add_commands", "fit_command", "whatif_command", "write_model"]


def add_commands(sub) -> None:
    """The ``fit`` and ``whatif`` subcommands of ``python -m emulator``."""
    p = sub.add_parser("fit", help="fit a device type's performance model from real traces")
    p.add_argument("traces", nargs="+", type=Path, help="Kineto / Chrome JSON traces (.json, .json.gz)")
    p.add_argument("--type", dest="device_type", default="gpu", help="the device type (default: gpu)")
    p.add_argument("--write", action="store_true", help="write the model into the type's spec")
    p.add_argument("--spec", type=Path, help="the spec to write (default: <type>.asimov as the monitor finds it)")
    p.add_argument("--json", action="store_true", help="print the model and its errors as JSON")
    p = sub.add_parser("whatif", help="what a trace's kernels would take on a fitted device type")
    p.add_argument("trace", type=Path)
    p.add_argument("--on", dest="device_type", required=True, help="a device type whose spec has a model")
    p.add_argument("--json", action="store_true")


def _read(paths: list[Path]) -> dict[str, Any]:
    traces = {}
    for path in paths:
        name = path.name if path.name not in traces else str(path)  # two folders' rank0.json
        try:
            traces[name] = read_trace(path)
        except (OSError, TraceError) as exc:
            raise SystemExit(f"cannot read {path}: {exc}") from None
    return traces


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f} %"


def _num(value: float | None) -> str:
    return "-" if not value else f"{value:,.3g}" if value < 1000 else f"{value:,.0f}"


def report_text(report: FitReport, device_type: str) -> str:
    lines = [f"{device_type}: fitted from {len(report.per_trace)} trace(s) in {report.fit_s:.2f} s",
             f"model: {MODEL_FORM}, one per operator class",
             f"{'class':14s}{'kernels':>8s}{'latency us':>12s}{'TFLOP/s':>10s}{'GB/s':>10s}"
             f"{'fallback us':>13s}{'curve err':>11s}{'family err':>12s}"]
    for c, p in report.model.items():
        lines.append(f"{c:14s}{int(p['kernels']):8d}{p['latency_us']:12.3f}{_num(p.get('tflops')):>10s}"
                     f"{_num(p.get('gbps')):>10s}{p['fallback_us']:13.3f}{_pct(p.get('error')):>11s}"
                     f"{_pct(p.get('family_error')):>12s}" + ("  (its group's curve)" if p.get("pooled") else ""))
    lines.append(f"then per kernel family: {len(report.detail.curves) if report.detail else 0} efficiency curves "
                 "over the class curve (the spec keeps the class curves; fit --json has both)")
    lines.append(f"held-out error (median absolute; held out: {report.scheme}): {_pct(report.error)}; "
                 f"by time ({report.time_scheme}): {_pct(report.by_time)}")
    for name, t in report.per_trace.items():
        classes = ", ".join(f"{c} {_pct(e['error'])} ({e['held_out']})" for c, e in t["per_class"].items())
        later = ", ".join(f"{c} {_pct(e['error'])} ({e['held_out']})" for c, e in t["by_time"]["per_class"].items())
        lines.append(f"  {name}: {_pct(t['error'])} on {t['held_out']} of {t['kernels']} kernels "
                     f"(class curves alone {_pct(t['curves_only'])}, class medians {_pct(t['class_medians'])}); {classes}")
        lines.append(f"    by time: {_pct(t['by_time']['error'])} on {t['by_time']['held_out']}; {later}")
        if "across" in t:
            a = t["across"]
            classes = ", ".join(f"{c} {_pct(e['error'])} ({e['held_out']})" for c, e in a["per_class"].items())
            lines.append(f"    fitted on the other traces: {_pct(a['error'])} on {a['held_out']}; {classes}")
    for how, n in report.fallbacks.items():
        lines.append(f"fell back ({n} held-out kernels): {how}: {FALLBACK_WHY[how]}")
    return "\n".join(lines)


def write_model(spec: Path, model: dict, note: str) -> None:
    """Replaces ``spec``'s performance section by ``model``; the file changes only if the new
    text compiles."""
    text = with_performance(spec.read_text(), model, note)
    try:
        compile_spec(text, str(spec))
    except (AsimovError, SpecErrors) as exc:
        raise SystemExit(f"{spec}: the spec with the model does not compile, left unchanged:\n{exc}") from None
    fd, tmp = tempfile.mkstemp(dir=spec.parent, prefix=f".{spec.name}.")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    Path(tmp).chmod(spec.stat().st_mode & 0o777)
    Path(tmp).replace(spec)
    perf_model.forget()


def fit_command(args: argparse.Namespace) -> int:
    spec = None
    if args.write:  # before the fit, so that a missing spec costs nothing
        spec = args.spec or find_spec(args.device_type, perf_model.spec_dirs())
        if spec is None or not spec.exists():
            raise SystemExit(f"no spec for device type {args.device_type!r} to write into (give --spec)")
    traces = _read(args.traces)
    report = fit_traces(traces)
    if not report.model:
        raise SystemExit("no device kernels in " + ", ".join(str(p) for p in args.traces))
    print(orjson.dumps(report.to_dict(), option=orjson.OPT_INDENT_2).decode() if args.json
          else report_text(report, args.device_type))
    if spec is not None:
        note = f"{', '.join(report.per_trace)}; held-out error {_pct(report.error)}"
        write_model(spec, report.model, note)
        if not args.json:
            print(f"wrote {len(report.model)} classes into {spec}")
    return 0


def whatif_command(args: argparse.Namespace) -> int:
    model = perf_model.model_for(args.device_type)
    if not model:
        raise SystemExit(f"device type {args.device_type!r} has no fitted performance model "
                         f"(python -m emulator fit TRACE... --type {args.device_type} --write)")
    (trace,) = _read([args.trace]).values()
    rows = predict_trace(trace, model)
    if args.json:
        print(orjson.dumps({"trace": args.trace.name, "on": args.device_type, "classes": rows},
                           option=orjson.OPT_INDENT_2).decode())
        return 0
    print(f"What if {args.trace.name} ran on {args.device_type} (its fitted model):")
    print(f"{'class':14s}{'kernels':>8s}{'recorded us':>14s}{'predicted us':>14s}{'ratio':>8s}"
          f"{'model error':>13s}{'fell back':>11s}")
    for c, r in rows.items():
        pred = r["predicted_us"]
        ratio = f"{pred / r['recorded_us']:.2f}" if pred is not None and r["recorded_us"] else "-"
        shown = "no model" if pred is None else f"{pred:,.1f}"
        print(f"{c:14s}{r['kernels']:8d}{r['recorded_us']:14,.1f}{shown:>14s}{ratio:>8s}"
              f"{_pct(r['error']):>13s}{r['fell_back']:11d}")
    print("model error: the class's median error on kernels held out of its fit; fell back: kernels without "
          "a size, predicted by their class's median")
    return 0
