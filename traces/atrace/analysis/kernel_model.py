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

The error is measured on kernels the fit never saw: every fifth kernel of each trace in start
order (`split`), and the second half of each trace by a model of the first (`halves`). A fit
of fewer than LEAVE_ONE_OUT_BELOW kernels, where every fifth would be fewer than ten, a
median of nothing, predicts each kernel by a model fitted on all the others instead, and by
time each kernel of the second half by a model of every kernel before it (`by_kernel`,
`by_time`; the report says which was done). `fit_traces` reports the median absolute percentage error overall, per trace, per class,
on sizes a family had not shown, and (several traces) for each trace by a model of the others.
"""

from __future__ import annotations

import itertools
import math
import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..model.trace import Trace
from .kernel_families import Detail, detail_from_json, model_from_json, stem
from .kernel_sizes import OP_CLASSES, Kernels, kernels_of

__all__ = ["FALLBACK_WHY", "HOW", "Detail", "FitReport", "Kernels", "detail_from_json", "fit", "fit_detail", "fit_traces", "halves",
           "kernels_of", "model_from_json", "predict", "predict_how", "predict_trace", "split", "by_kernel", "by_time",
           "LEAVE_ONE_OUT_BELOW"]

HOLD_OUT_EVERY = 5
#: Fewer kernels than this in a fit (every fifth would hold out fewer than ten, no median):
#: each kernel is predicted by a model fitted on all the others instead.
LEAVE_ONE_OUT_BELOW = 10 * HOLD_OUT_EVERY
SIMPLER_BY = 0.01  # a term is kept only if it lowers the fit's summed relative error by 1 %
MODEL_FORM = "bandwidth-latency curve: time = latency + flops/peak + bytes/bandwidth (NNLS on relative error)"
Model = dict[str, dict[str, float]]


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


#: Classes whose kernels are limited by the same thing: a class with too few sized kernels for
#: a curve of its own takes the curve fitted to its group's (marked ``pooled``).
GROUPS = {"compute": ("gemm", "conv", "attention"), "bandwidth": ("elementwise", "reduction", "memory", "other")}
MIN_SIZED = 3


def _group_of(cls: str) -> str | None:
    return next((g for g, members in GROUPS.items() if cls in members), None)


def _group_curves(kernels: Kernels) -> dict[str, dict[str, float]]:
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
        groups = _group_curves(kernels)
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


def _size(flops: np.ndarray, nbytes: np.ndarray) -> np.ndarray:
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
    detail = Detail(groups=_group_curves(kernels) if groups is None else groups)
    sized = np.isfinite(kernels.flops) & np.isfinite(kernels.bytes)
    base = np.full(len(kernels), np.nan)
    for c, p in model.items():
        m = kernels.cls == c
        base[m] = _curve(p, kernels.flops[m], kernels.bytes[m])
    ok = sized & np.isfinite(base) & (base > 0)
    x_all = _size(kernels.flops, kernels.bytes)
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
    x_all = _size(kernels.flops, kernels.bytes)
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
    detail: Detail | None = None
    by_time: float | None = None  # the same, fitted on each trace's first half, on its second half
    fallbacks: dict[str, int] = field(default_factory=dict)  # how -> held-out kernels (fallbacks only)
    scheme: str = ""  # which kernels were held out of which fit (`by_kernel`)
    time_scheme: str = ""  # the same by time (`by_time`)

    def to_dict(self) -> dict[str, Any]:
        return {"form": self.form, "model": self.model, "held_out_error": self.error,
                "by_time_error": self.by_time,
                "held_out": self.scheme, "by_time_held_out": self.time_scheme, "fallbacks": self.fallbacks,
                "fallback_why": {h: FALLBACK_WHY[h] for h in self.fallbacks},
                "per_trace": self.per_trace, "fit_s": round(self.fit_s, 4),
                "families": self.detail.to_dict() if self.detail else None}


def halves(kernels: Kernels) -> tuple[Kernels, Kernels]:
    """(fit, test): the first half of the kernels in start order, and the second."""
    first = np.arange(len(kernels)) < len(kernels) // 2
    return kernels.take(first), kernels.take(~first)


def _fit_both(kernels: Kernels) -> tuple[Model, Detail]:
    groups = _group_curves(kernels)
    model = fit(kernels, groups)
    return model, fit_detail(model, kernels, groups)


@dataclass
class _Held:
    """Held-out kernels and what the model that did not see them predicted."""

    kernels: Kernels
    pred: np.ndarray  # with the family tables
    how: np.ndarray
    curves: np.ndarray  # the class curves alone
    new: np.ndarray  # bool: sized, and a size its family never showed the fit
    medians: np.ndarray  # the baseline: the median time of the kernel's class in the fit (NaN: none)

    @staticmethod
    def of(model: Model, detail: Detail, held: Kernels, fitted: Kernels) -> _Held:
        pred, how = predict_how(model, held, detail)
        seen = _sizes_seen(fitted)
        keys = zip(held.family.tolist(), np.round(_size(held.flops, held.bytes), 6).tolist())
        new = np.array([k not in seen for k in keys], bool).reshape(-1)
        new &= np.isfinite(held.flops) & np.isfinite(held.bytes)
        return _Held(held, pred, how, predict(model, held), new, class_medians(fitted, held))

    @staticmethod
    def concat(parts: list[_Held]) -> _Held:
        return _Held(Kernels.concat([p.kernels for p in parts]),
                     *(np.concatenate([getattr(p, f) for p in parts]) for f in _HELD_ARRAYS))

    def take(self, mask: np.ndarray) -> _Held:
        return _Held(self.kernels.take(mask), *(getattr(self, f)[mask] for f in _HELD_ARRAYS))


_HELD_ARRAYS = ("pred", "how", "curves", "new", "medians")


def class_medians(fitted: Kernels, held: Kernels) -> np.ndarray:
    """Each held-out kernel's prediction by the baseline that knows only its class: the
    median recorded time of the class's kernels in the fit (NaN for a class the fit lacks).
    A model no better than this learnt nothing from sizes or families; a trace where even
    the model misses by about as much records nothing that tells its kernels apart."""
    medians = {c: float(np.median(fitted.dur_us[fitted.cls == c])) for c in set(fitted.cls.tolist())}
    return np.array([medians.get(c, np.nan) for c in held.cls.tolist()], float)


def _offsets(every: dict[str, Kernels]) -> dict[str, np.ndarray]:
    """Each trace's kernels' positions in the concatenation of ``every``."""
    out, at = {}, 0
    for name, k in every.items():
        out[name] = np.arange(at, at + len(k))
        at += len(k)
    return out


def _one_out(kernels: Kernels, i: int, before: Kernels | None = None) -> _Held:
    """Kernel ``i`` predicted by a model fitted on ``before`` when given, else on every other kernel."""
    mask = np.zeros(len(kernels), bool)
    mask[i] = True
    fitted = kernels.take(~mask) if before is None else before
    return _Held.of(*_fit_both(fitted), kernels.take(mask), fitted)


def by_kernel(every: dict[str, Kernels]) -> tuple[Model, Detail, dict[str, _Held], str]:
    """The model of ``every`` (name -> kernels) and each trace's held-out kernels with their
    predictions: every fifth kernel of each trace held out of one fit (`split`), or, when the
    traces have fewer than LEAVE_ONE_OUT_BELOW kernels in all, each kernel predicted by a
    model fitted on all the others (the model returned is then fitted on every kernel)."""
    whole = Kernels.concat(list(every.values()))
    if len(whole) < LEAVE_ONE_OUT_BELOW:
        model, detail = _fit_both(whole)
        held = [_one_out(whole, i) for i in range(len(whole))]
        at = _offsets(every)
        return model, detail, {n: _Held.concat([held[i] for i in at[n]]) for n in every}, \
            f"leave-one-out over {len(whole)} kernels"
    parts = {name: split(k) for name, k in every.items()}
    fitted = Kernels.concat([f for f, _ in parts.values()])
    model, detail = _fit_both(fitted)
    return model, detail, {n: _Held.of(model, detail, h, fitted) for n, (_, h) in parts.items()}, \
        f"every {HOLD_OUT_EVERY}th kernel of each trace"


def by_time(every: dict[str, Kernels]) -> tuple[dict[str, _Held], str]:
    """Each trace's second half predicted by a model of the first halves (`halves`), or, when
    the traces have fewer than LEAVE_ONE_OUT_BELOW kernels in all, each kernel of a trace's
    second half by a model of every kernel before it in its trace and the other traces' first
    halves (the model never sees a kernel that ran later)."""
    halved = {name: halves(k) for name, k in every.items()}
    firsts = Kernels.concat([f for f, _ in halved.values()])
    if sum(len(k) for k in every.values()) >= LEAVE_ONE_OUT_BELOW:
        model, detail = _fit_both(firsts)
        return {n: _Held.of(model, detail, second, firsts) for n, (_, second) in halved.items()}, \
            "fitted on each trace's first half, measured on its second"
    out = {}
    for name, k in every.items():
        others = [f for n, (f, _) in halved.items() if n != name]
        out[name] = _Held.concat([_one_out(k, i, Kernels.concat([*others, k.take(np.arange(len(k)) < i)]))
                                  for i in range(len(k) // 2, len(k))])
    return out, "each kernel of a trace's second half by a model of every kernel before it"


def fit_traces(traces: dict[str, Trace]) -> FitReport:
    """Fits one model on the kernels of ``traces`` (name -> trace) and measures it on kernels
    its fit did not see (`by_kernel`), per trace and per class; then by time (`by_time`);
    with several traces (of one device type), each trace whole by a model fitted on the
    others (``across``). Each class's ``error`` parameter is its class curve's held-out error
    over all traces (what the model a spec keeps predicts), ``family_error`` the error with
    the family tables."""
    started = time.perf_counter()
    every = {name: kernels_of(tr) for name, tr in traces.items()}
    model, detail, held, scheme = by_kernel(every)
    later, time_scheme = by_time(every)
    per_trace = {}
    for name, h in held.items():
        per_trace[name] = _score(h) | {"kernels": len(every[name]), "scheme": scheme}
        per_trace[name]["curves_only"] = _mdape(h.curves, h.kernels.dur_us)
        per_trace[name]["class_medians"] = _mdape(h.medians, h.kernels.dur_us)
        per_trace[name]["by_time"] = _score(later[name]) | {"scheme": time_scheme}
    if len(every) > 1:  # each trace predicted whole by a model of the others (one device type)
        for name, k in every.items():
            others = Kernels.concat([o for n, o in every.items() if n != name])
            per_trace[name]["across"] = _score(_Held.of(*_fit_both(others), k, others))
    held_all = _Held.concat(list(held.values()))
    overall = _score(held_all)
    # ``error``: the class curve's own (what a spec keeps); ``family_error``: with the families
    for c in model:
        m = held_all.kernels.cls == c
        if m.any() and (err := _mdape(held_all.curves[m], held_all.kernels.dur_us[m])) is not None:
            model[c]["error"] = round(err, 4)
    for c, err in overall["per_class"].items():
        if err["error"] is not None and c in model:
            model[c]["family_error"] = round(err["error"], 4)
    return FitReport(model, overall["error"], per_trace, time.perf_counter() - started, detail=detail,
                     by_time=_score(_Held.concat(list(later.values())))["error"], fallbacks=overall["fallbacks"],
                     scheme=scheme, time_scheme=time_scheme)


def _sizes_seen(kernels: Kernels) -> set[tuple[str, float]]:
    return set(zip(kernels.family.tolist(), np.round(_size(kernels.flops, kernels.bytes), 6).tolist()))


def _score(h: _Held) -> dict[str, Any]:
    """Errors of held-out predictions: overall, per class, how each kernel was predicted and
    which fell back; and on the sized kernels whose size the fit never saw in their family
    (``new_sizes``: what the curves are worth beyond repeats of a kernel)."""
    k, pred, how = h.kernels, h.pred, h.how
    per_class = {}
    for c in OP_CLASSES:
        mask = k.cls == c
        if mask.any():
            per_class[c] = {"held_out": int(mask.sum()), "error": _mdape(pred[mask], k.dur_us[mask])}
            fell = {f: int(((how == f) & mask).sum()) for f in FALLBACK_WHY if ((how == f) & mask).any()}
            if fell:
                per_class[c]["fallbacks"] = fell
    return {"error": _mdape(pred, k.dur_us), "held_out": len(k), "per_class": per_class,
            "fallbacks": {f: int((how == f).sum()) for f in FALLBACK_WHY if (how == f).any()},
            "how": {f: int((how == f).sum()) for f in HOW if (how == f).any()},
            "new_sizes": {"held_out": int(h.new.sum()),
                          "error": _mdape(pred[h.new], k.dur_us[h.new]) if h.new.any() else None}}


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
