"""How well a kernel performance model (`kernel_model`) predicts kernels its fit never saw.

Kernels are held out two ways: every fifth kernel of each trace in start order (`split`), and
the second half of each trace, predicted by a model of the first (`halves`). A fit of fewer
than LEAVE_ONE_OUT_BELOW kernels, where every fifth would be fewer than ten, a median of
nothing, predicts each kernel by a model fitted on all the others instead, and by time each
kernel of the second half by a model of every kernel before it (`by_kernel`, `by_time`; the
report says which was done). `fit_traces` reports the median absolute percentage error
overall, per trace, per class, on sizes a family had not shown, against the baseline that
knows only each kernel's class (`class_medians`), and (several traces) for each trace by a
model of the others.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..model.trace import Trace
from .kernel_families import Detail
from .kernel_model import (
    FALLBACK_WHY,
    HOW,
    MODEL_FORM,
    Model,
    fit,
    fit_detail,
    group_curves,
    predict,
    predict_how,
    size_of,
)
from .kernel_sizes import OP_CLASSES, Kernels, kernels_of

__all__ = ["HOLD_OUT_EVERY", "LEAVE_ONE_OUT_BELOW", "FitReport", "by_kernel", "by_time", "class_medians", "fit_traces",
           "halves", "split"]

HOLD_OUT_EVERY = 5
#: Fewer kernels than this in a fit (every fifth would hold out fewer than ten, no median):
#: each kernel is predicted by a model fitted on all the others instead.
LEAVE_ONE_OUT_BELOW = 10 * HOLD_OUT_EVERY


def split(kernels: Kernels) -> tuple[Kernels, Kernels]:
    """(fit, held out): every fifth kernel in start order is held out."""
    held = (np.arange(len(kernels)) % HOLD_OUT_EVERY) == HOLD_OUT_EVERY - 1
    return kernels.take(~held), kernels.take(held)


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
    groups = group_curves(kernels)
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
        keys = zip(held.family.tolist(), np.round(size_of(held.flops, held.bytes), 6).tolist())
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
    return set(zip(kernels.family.tolist(), np.round(size_of(kernels.flops, kernels.bytes), 6).tolist()))


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
