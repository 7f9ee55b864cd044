"""Kernel performance models fitted from traces, and what a trace's kernels would take under one.

A model gives each operator class (`kernel_sizes.OP_CLASSES`) a **bandwidth--latency curve**
with two throughputs::

    time_us = latency_us + flops / (tflops · 1e6) + bytes / (gbps · 1e3)

fitted by non-negative least absolute *relative* error (so a 3 µs kernel weighs as much as a
3 ms one; every subset of the three terms is solved and the best one whose values are all
>= 0 kept: a class whose kernels are all memory-bound gets no ``tflops``). A class with one
or two sized kernels takes the curve of its group (`GROUPS`). That is the ``Model``: plain
data (class -> parameters), what an Asimov spec's ``performance`` section holds.

On top of it a `Detail` per kernel family (`kernel_sizes.kernel_family`): the family's
efficiency over its class curve as a function of size, the time of each launch and the time
over threads launched for kernels without a size, and medians to fall back on. `predict_how`
says for each kernel which of `HOW` predicted it; the fallbacks (`FALLBACK_WHY`) are counted.

How well a model predicts kernels it did not see is measured in `kernel_scoring`.
"""

from __future__ import annotations

import itertools
import math
from collections import defaultdict
from typing import Any

import numpy as np

from ..model.trace import Trace
from .kernel_families import Detail, detail_from_json, model_from_json, stem
from .kernel_sizes import OP_CLASSES, Kernels, kernels_of

__all__ = ["FALLBACK_WHY", "HOW", "MODEL_FORM", "Detail", "Kernels", "Model", "detail_from_json", "fit", "fit_detail",
           "group_curves", "kernels_of", "model_from_json", "predict", "predict_how", "predict_trace", "size_of"]

SIMPLER_BY = 0.01  # a term is kept only if it lowers the fit's summed relative error by 1 %
MODEL_FORM = "bandwidth-latency curve: time = latency + flops/peak + bytes/bandwidth (NNLS on relative error)"
Model = dict[str, dict[str, float]]


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


#: Classes whose kernels are limited by the same thing: a class with too few sized kernels for
#: a curve of its own takes the curve fitted to its group's (marked ``pooled``).
GROUPS = {"compute": ("gemm", "conv", "attention"), "bandwidth": ("elementwise", "reduction", "memory", "other")}
MIN_SIZED = 3


def _group_of(cls: str) -> str | None:
    return next((g for g, members in GROUPS.items() if cls in members), None)


def group_curves(kernels: Kernels) -> dict[str, dict[str, float]]:
    out = {}
    sized = np.isfinite(kernels.flops) & np.isfinite(kernels.bytes)
    for g, members in GROUPS.items():
        k = kernels.take(np.isin(kernels.cls, members) & sized)
        if len(k) >= MIN_SIZED:
            out[g] = _fit_class(k)
    return out


def fit(kernels: Kernels, groups: dict[str, dict[str, float]] | None = None) -> Model:
    """A model from kernels (every class that has some); ``groups``: `_group_curves` of the
    same kernels when already fitted."""
    model = {c: _fit_class(kernels.take(kernels.cls == c)) for c in OP_CLASSES if (kernels.cls == c).any()}
    few = {c for c in model if 0 < int((np.isfinite(kernels.flops) & (kernels.cls == c)).sum()) < MIN_SIZED}
    if few and groups is None:
        groups = group_curves(kernels)
    for c in few:
        p, group = model[c], (groups or {}).get(_group_of(c) or "")
        if group is not None:
            p.update(_scaled(group, _level(group, kernels.take((kernels.cls == c) & np.isfinite(kernels.flops)))),
                     pooled=1)
    return model


def _level(curve: dict[str, float], k: Kernels) -> float:
    """How much slower (> 1) than ``curve`` the kernels ``k`` ran (the median ratio): a class
    of a kernel or two takes its group's curve at its own level (the shape from the many)."""
    predicted = _curve(curve, k.flops, k.bytes)
    return float(np.median(k.dur_us[predicted > 0] / predicted[predicted > 0])) if (predicted > 0).any() else 1.0


def _scaled(curve: dict[str, float], level: float) -> dict[str, float]:
    """``curve``'s terms, every time multiplied by ``level``."""
    rates = {rate: curve[rate] / level for rate in ("tflops", "gbps") if curve.get(rate)}
    return {"latency_us": curve["latency_us"] * level, **rates}


def _curve(p: dict[str, float], flops: np.ndarray, nbytes: np.ndarray) -> np.ndarray:
    t = np.full(len(flops), float(p["latency_us"]))
    if p.get("tflops"):
        t = t + np.nan_to_num(flops) / (p["tflops"] * 1e6)
    if p.get("gbps"):
        t = t + np.nan_to_num(nbytes) / (p["gbps"] * 1e3)
    return t


def size_of(flops: np.ndarray, nbytes: np.ndarray) -> np.ndarray:
    """The coordinate of a family's efficiency curve: log of the problem's size (FLOPs plus
    bytes: a GEMM's FLOPs dominate, an elementwise kernel's bytes)."""
    return np.log1p(np.nan_to_num(flops) + np.nan_to_num(nbytes))


# How a kernel's time was predicted, best first; the last three are fallbacks.
HOW = ("family curve", "class curve", "same launch", "launch curve", "family median", "template median", "tile rate",
       "group curve", "class median", "no model")
FALLBACK_WHY = {
    "template median": "no size recorded and its kernel family not seen in the fit; the median of the families "
                       "of its template (its name without template arguments)",
    "tile rate": "no size recorded and its kernel family not seen in the fit; the output its macro tile and grid "
                 "cover, at its class's median time per output element",
    "group curve": "its class has no kernel in the fit; the curve fitted to its group's classes "
                   "(compute: gemm, conv, attention; bandwidth: elementwise, reduction, memory, other)",
    "family median": "no size recorded; the median of its kernel family",
    "class median": "no size recorded and its kernel family not seen in the fit; the median of its class",
    "no model": "its class has no kernel in the fit",
}


def fit_detail(model: Model, kernels: Kernels, groups: dict[str, dict[str, float]] | None = None) -> Detail:
    """Each kernel family's efficiency curve relative to its class's curve, and the medians
    the unsized kernels fall back on."""
    detail = Detail(groups=group_curves(kernels) if groups is None else groups)
    sized = np.isfinite(kernels.flops) & np.isfinite(kernels.bytes)
    base = np.full(len(kernels), np.nan)
    for c, p in model.items():
        m = kernels.cls == c
        base[m] = _curve(p, kernels.flops[m], kernels.bytes[m])
    ok = sized & np.isfinite(base) & (base > 0)
    x_all = size_of(kernels.flops, kernels.bytes)
    groups: dict[str, list[int]] = defaultdict(list)
    for i, f in enumerate(kernels.family.tolist()):
        groups[f].append(i)
    for f, idx in groups.items():
        ix = np.array(idx)
        detail.medians[f] = float(np.median(kernels.dur_us[ix]))
        s = ix[ok[ix]]
        if len(s):
            x = np.round(x_all[s], 6)
            lr = np.log(kernels.dur_us[s] / base[s])
            xs = np.unique(x)
            detail.curves[f] = (xs.tolist(), [float(np.median(lr[x == v])) for v in xs])
    launches: dict[str, list[float]] = defaultdict(list)
    for i in np.flatnonzero(~sized).tolist():
        if kernels.launch[i]:
            launches[f"{kernels.family[i]}|{kernels.launch[i]}"].append(float(kernels.dur_us[i]))
    detail.launches = {k: float(np.median(v)) for k, v in launches.items()}
    stems: dict[str, list[float]] = defaultdict(list)
    for f, d in zip(kernels.family.tolist(), kernels.dur_us.tolist()):
        stems[stem(f)].append(d)
    detail.stems = {k: float(np.median(v)) for k, v in stems.items()}
    tiled = np.isfinite(kernels.tile_work) & (kernels.tile_work > 0)
    for c in set(kernels.cls[tiled].tolist()):
        m = tiled & (kernels.cls == c)
        detail.tile_rates[c] = float(np.median(kernels.dur_us[m] / kernels.tile_work[m]))
    # unsized kernels of a family launched with several thread counts: time over threads
    loose = ~sized & np.isfinite(kernels.threads) & (kernels.threads > 0)
    for f in set(kernels.family[loose].tolist()):
        m = loose & (kernels.family == f)
        x = np.round(np.log(kernels.threads[m]), 6)
        xs = np.unique(x)
        if len(xs) >= 2:
            y = np.log(kernels.dur_us[m])
            detail.by_threads[f] = (xs.tolist(), [float(np.median(y[x == v])) for v in xs])
    return detail


def predict_how(model: Model, kernels: Kernels, detail: Detail | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Predicted time (µs) of each kernel (NaN for a class the model lacks) and how it was
    predicted (one of `HOW`). Without ``detail``: the class curves, and the class median for
    kernels without a size."""
    out = np.full(len(kernels), np.nan)
    how = np.full(len(kernels), "no model", dtype=object)
    sized = np.isfinite(kernels.flops) & np.isfinite(kernels.bytes)
    for c, p in model.items():
        mask = kernels.cls == c
        if mask.any():
            out[mask] = _curve(p, kernels.flops[mask], kernels.bytes[mask])
            how[mask & sized] = "class curve"
            unsized = mask & ~sized
            out[unsized] = p.get("fallback_us", p["latency_us"])
            how[unsized] = "class median"
    if detail is None:
        return out, how
    for g, curve in detail.groups.items():
        m = (how == "no model") & sized & np.isin(kernels.cls, GROUPS[g])
        out[m], how[m] = _curve(curve, kernels.flops[m], kernels.bytes[m]), "group curve"
    x_all = size_of(kernels.flops, kernels.bytes)
    on_curve = how == "class curve"
    for f in set(kernels.family[on_curve].tolist()) & detail.curves.keys():
        m = on_curve & (kernels.family == f)
        xs, lrs = detail.curves[f]
        out[m] *= np.exp(np.interp(x_all[m], xs, lrs))
        how[m] = "family curve"
    for i in np.flatnonzero(how == "class median").tolist():
        seen = detail.launches.get(f"{kernels.family[i]}|{kernels.launch[i]}") if kernels.launch[i] else None
        by_threads = detail.by_threads.get(kernels.family[i])
        if seen is not None:
            out[i], how[i] = seen, "same launch"
        elif by_threads is not None and np.isfinite(kernels.threads[i]) and kernels.threads[i] > 0:
            out[i] = math.exp(float(np.interp(math.log(kernels.threads[i]), *by_threads)))
            how[i] = "launch curve"
        elif kernels.family[i] in detail.medians:
            out[i], how[i] = detail.medians[kernels.family[i]], "family median"
        elif stem(kernels.family[i]) in detail.stems:
            out[i], how[i] = detail.stems[stem(kernels.family[i])], "template median"
        elif kernels.cls[i] in detail.tile_rates and np.isfinite(kernels.tile_work[i]) and kernels.tile_work[i] > 0:
            out[i], how[i] = detail.tile_rates[kernels.cls[i]] * kernels.tile_work[i], "tile rate"
    return out, how


def predict(model: Model, kernels: Kernels, detail: Detail | None = None) -> np.ndarray:
    """Predicted time (µs) of each kernel; NaN for a class the model lacks."""
    return predict_how(model, kernels, detail)[0]


def predict_trace(trace: Trace, model: Model, detail: Detail | None = None) -> dict[str, dict[str, Any]]:
    """What if ``trace``'s kernels ran on the device ``model`` (and ``detail``, its families)
    describes: per class, the kernels, their recorded time and the model's (µs; None for a
    class the model lacks), the model's held-out error for the class (``error``: what the
    prediction is worth; None when the fit measured none) and how many of the kernels fell
    back (no size, or a family the fit did not see)."""
    kernels = kernels_of(trace)
    pred, how = predict_how(model, kernels, detail)
    out: dict[str, dict[str, Any]] = defaultdict(dict)
    for c in OP_CLASSES:
        mask = kernels.cls == c
        if not mask.any():
            continue
        p = pred[mask]
        out[c] = {"kernels": int(mask.sum()), "recorded_us": float(kernels.dur_us[mask].sum()),
                  "predicted_us": float(p.sum()) if np.isfinite(p).all() else None,
                  "error": (model.get(c) or {}).get("error" if detail is None else "family_error"),
                  "fell_back": int(np.isin(how[mask], list(FALLBACK_WHY)).sum())}
    return dict(out)
