"""Kernel performance models fitted from traces, and what a trace's kernels would take under one.

A model gives each operator class (`kernel_sizes.OP_CLASSES`) a **bandwidth--latency curve**
with two throughputs::

    time_us = latency_us + flops / (tflops · 1e6) + bytes / (gbps · 1e3)

fitted by non-negative least squares on the *relative* error (each kernel's row divided by
its recorded time, so a 3 µs kernel weighs as much as a 3 ms one). The three parameters are
the exact non-negative solution: every subset of them is solved and the best one whose
values are all >= 0 kept (a class whose kernels are all memory-bound gets no ``tflops``). A
kernel with no recorded size takes the class's ``fallback_us`` (the median time of the class's
kernels); a class with no sized kernel is latency-only.

The error is measured on kernels held out of the fit: every fifth kernel of each trace, in
start order (`split`), never seen by the fit; `fit_traces` reports its median absolute
percentage error per trace and per class. A model is plain data (class -> parameters), what
an Asimov spec's ``performance`` section holds.
"""

from __future__ import annotations

import itertools
import math
import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..model.links import launch_pairs
from ..model.trace import DEVICE_KINDS, Trace
from .correlation import host_operator_of
from .kernel_sizes import OP_CLASSES, classify, kernel_size

__all__ = ["FitReport", "Kernels", "fit", "fit_traces", "kernels_of", "model_from_json", "predict", "predict_trace",
           "split"]

HOLD_OUT_EVERY = 5
SIMPLER_BY = 0.01  # a term is kept only if it lowers the fit's summed relative error by 1 %
MODEL_FORM = "bandwidth-latency curve: time = latency + flops/peak + bytes/bandwidth (NNLS on relative error)"
Model = dict[str, dict[str, float]]


@dataclass
class Kernels:
    """The kernels of a trace: class, size, recorded time (µs), in start order."""

    cls: np.ndarray  # str
    flops: np.ndarray  # NaN when unknown
    bytes: np.ndarray
    dur_us: np.ndarray

    def __len__(self) -> int:
        return len(self.dur_us)

    def take(self, mask: np.ndarray) -> Kernels:
        return Kernels(self.cls[mask], self.flops[mask], self.bytes[mask], self.dur_us[mask])

    @staticmethod
    def concat(parts: list[Kernels]) -> Kernels:
        return Kernels(*(np.concatenate([getattr(p, f) for p in parts]) for f in ("cls", "flops", "bytes", "dur_us")))


def kernels_of(trace: Trace) -> Kernels:
    """Every device kernel, copy, fill and collective of ``trace`` with its class and size."""
    dev = np.flatnonzero(trace.on_device & trace.kind_mask(*DEVICE_KINDS) & (trace.dur > 0))
    dev = dev[np.argsort(trace.ts[dev], kind="stable")]
    rt, launched = launch_pairs(trace)
    ops = host_operator_of(trace, rt) if len(rt) else np.zeros(0, np.int64)
    op_of = dict(zip(launched.tolist(), ops.tolist()))
    strings = trace.strings.strings
    op_args: dict[int, dict[str, Any]] = {}
    rows = []
    for i in dev.tolist():
        op = op_of.get(i, -1)
        op_name = strings[trace.op[op]] if op >= 0 else None
        name, kind = strings[trace.name[i]], int(trace.kind[i])
        cls = classify(name, kind, op_name)
        if op >= 0 and op not in op_args:
            op_args[op] = trace.args.get(op) or {}
        kargs = trace.args.get(i)
        flops, nbytes = kernel_size(cls, name, kargs, op_name, op_args.get(op))
        rows.append((cls, flops, nbytes, int(trace.dur[i]) / 1000.0))
    if not rows:
        return Kernels(np.zeros(0, "<U16"), *(np.zeros(0) for _ in range(3)))
    cls, flops, nbytes, dur = zip(*rows)
    return Kernels(np.array(cls), np.array(flops, float), np.array(nbytes, float), np.array(dur, float))


def split(kernels: Kernels) -> tuple[Kernels, Kernels]:
    """(fit, held out): every fifth kernel in start order is held out."""
    held = (np.arange(len(kernels)) % HOLD_OUT_EVERY) == HOLD_OUT_EVERY - 1
    return kernels.take(~held), kernels.take(held)


def _irls_l1(a: np.ndarray, iterations: int = 40) -> np.ndarray:
    """Coefficients c minimising sum(|a·c - 1|) (least absolute relative error), by
    iteratively reweighted least squares from the least-squares start."""
    ones = np.ones(len(a))
    coef, *_ = np.linalg.lstsq(a, ones, rcond=None)
    for _ in range(iterations):
        w = 1.0 / np.sqrt(np.maximum(np.abs(a @ coef - 1.0), 1e-4))
        coef, *_ = np.linalg.lstsq(a * w[:, None], w, rcond=None)
    return coef


def _nnls_relative(x: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Non-negative coefficients c minimising sum(|x·c / t - 1|): every subset of the columns
    is fitted (`_irls_l1`), smaller ones first, and the best one whose values are all >= 0
    kept; a subset with one more term must be better by SIMPLER_BY."""
    a = x / t[:, None]
    best, best_err = np.zeros(x.shape[1]), math.inf
    for r in range(1, x.shape[1] + 1):
        for cols in itertools.combinations(range(x.shape[1]), r):
            coef = _irls_l1(a[:, cols])
            if (coef < 0).any():
                continue
            err = float(np.sum(np.abs(a[:, cols] @ coef - 1.0)))
            if err < best_err * (1.0 - SIMPLER_BY):
                best_err, best = err, np.zeros(x.shape[1])
                best[list(cols)] = coef
    return best


def _fit_class(k: Kernels) -> dict[str, float]:
    params: dict[str, float] = {"kernels": len(k), "fallback_us": float(np.median(k.dur_us))}
    sized = np.isfinite(k.flops) & np.isfinite(k.bytes)
    if sized.sum() < 3:
        params["latency_us"] = params["fallback_us"]
        return params
    x = np.column_stack([np.ones(int(sized.sum())), k.flops[sized] / 1e6, k.bytes[sized] / 1e3])
    lat, per_mflop, per_kb = _nnls_relative(x, k.dur_us[sized])
    params["latency_us"] = float(lat) if lat >= 1e-3 else 0.0  # below a nanosecond: none
    if per_mflop > 0:
        params["tflops"] = float(1.0 / per_mflop)
    if per_kb > 0:
        params["gbps"] = float(1.0 / per_kb)
    return params


def fit(kernels: Kernels) -> Model:
    """A model from kernels (every class that has some)."""
    return {c: _fit_class(kernels.take(kernels.cls == c)) for c in OP_CLASSES if (kernels.cls == c).any()}


def predict(model: Model, kernels: Kernels) -> np.ndarray:
    """Predicted time (µs) of each kernel; NaN for a class the model lacks."""
    out = np.full(len(kernels), np.nan)
    for c, p in model.items():
        mask = kernels.cls == c
        if not mask.any():
            continue
        flops, nbytes = kernels.flops[mask], kernels.bytes[mask]
        t = np.full(int(mask.sum()), float(p["latency_us"]))
        if p.get("tflops"):
            t = t + np.nan_to_num(flops) / (p["tflops"] * 1e6)
        if p.get("gbps"):
            t = t + np.nan_to_num(nbytes) / (p["gbps"] * 1e3)
        unsized = ~(np.isfinite(flops) & np.isfinite(nbytes))
        t[unsized] = p.get("fallback_us", p["latency_us"])
        out[mask] = t
    return out


def _mdape(pred: np.ndarray, actual: np.ndarray) -> float | None:
    ok = np.isfinite(pred)
    if not ok.any():
        return None
    return float(np.median(np.abs(pred[ok] - actual[ok]) / actual[ok]))


@dataclass
class FitReport:
    """A fitted model and how well it predicts kernels it did not see."""

    model: Model
    error: float | None  # median absolute percentage error (a fraction) over every held-out kernel
    per_trace: dict[str, dict[str, Any]] = field(default_factory=dict)  # name -> error, per class
    fit_s: float = 0.0
    form: str = MODEL_FORM

    def to_dict(self) -> dict[str, Any]:
        return {"form": self.form, "model": self.model, "held_out_error": self.error,
                "per_trace": self.per_trace, "fit_s": round(self.fit_s, 4)}


def fit_traces(traces: dict[str, Trace]) -> FitReport:
    """Fits one model on the kernels of ``traces`` (name -> trace; every fifth kernel of each
    held out) and measures it on the held-out kernels, per trace and per class. Each class's
    ``error`` parameter is its held-out error over all traces."""
    started = time.perf_counter()
    parts = {name: split(kernels_of(tr)) for name, tr in traces.items()}
    model = fit(Kernels.concat([fitted for fitted, _ in parts.values()]))
    held_all = Kernels.concat([held for _, held in parts.values()])
    per_trace = {name: _errors(model, held) | {"kernels": len(fitted) + len(held)}
                 for name, (fitted, held) in parts.items()}
    overall = _errors(model, held_all)
    for c, err in overall["per_class"].items():
        if err["error"] is not None:
            model[c]["error"] = round(err["error"], 4)
    return FitReport(model, overall["error"], per_trace, time.perf_counter() - started)


def _errors(model: Model, held: Kernels) -> dict[str, Any]:
    pred = predict(model, held)
    per_class = {}
    for c in OP_CLASSES:
        mask = held.cls == c
        if mask.any():
            per_class[c] = {"held_out": int(mask.sum()), "error": _mdape(pred[mask], held.dur_us[mask])}
    return {"error": _mdape(pred, held.dur_us), "held_out": len(held), "per_class": per_class}


def model_from_json(data: Any) -> Model:
    """A model from JSON: ``{"model": {class: params}}`` (what ``fit --json`` prints) or the
    class -> parameters mapping itself; ValueError saying what is wrong otherwise."""
    model = data.get("model", data) if isinstance(data, dict) else None
    if not isinstance(model, dict) or not model:
        raise ValueError("expected a performance model: {class: {latency_us: ..., ...}}")
    for c, p in model.items():
        if c not in OP_CLASSES:
            raise ValueError(f"unknown operator class {c!r} (one of {', '.join(OP_CLASSES)})")
        if not isinstance(p, dict) or not isinstance(p.get("latency_us"), int | float):
            raise ValueError(f"class {c!r} needs a numeric latency_us")
        for key in ("tflops", "gbps", "fallback_us"):
            if p.get(key) is not None and (not isinstance(p[key], int | float) or p[key] < 0):
                raise ValueError(f"class {c!r}: {key} must be a number >= 0")
    return model


def predict_trace(trace: Trace, model: Model) -> dict[str, dict[str, Any]]:
    """What if ``trace``'s kernels ran on the device ``model`` describes: per class, the kernels,
    their recorded time and the model's (µs; None for a class the model lacks)."""
    kernels = kernels_of(trace)
    pred = predict(model, kernels)
    out: dict[str, dict[str, Any]] = defaultdict(dict)
    for c in OP_CLASSES:
        mask = kernels.cls == c
        if not mask.any():
            continue
        p = pred[mask]
        out[c] = {"kernels": int(mask.sum()), "recorded_us": float(kernels.dur_us[mask].sum()),
                  "predicted_us": float(p.sum()) if np.isfinite(p).all() else None}
    return dict(out)
