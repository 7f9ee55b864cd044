"""What every rule reads: the trace's steps, the windows analysed (each with its path model)
and the facts shared between rules (who launched what, the input code of each step).

A window is a step (``ProfilerStep#N``, the emulator's ``step#N``), or the whole trace when
it has none (cut into parts when it is too big). At most ``max_windows`` windows holding
``max_window_events`` work events together are analysed, evenly spaced; a rule's saving
over the trace is its saving over those windows scaled by the time of every window over the
time of the analysed ones.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from ...model.links import graph_launches, launch_pairs
from ...model.stats import merge_intervals
from ...model.trace import DEVICE_KINDS, Kind, Trace
from ..paths.critical_path import PATH_KINDS
from ..whatif import PathModel, path_model
from .limits import AdviceLimits

_STEP = re.compile(r"^(ProfilerStep#|step#)(\d+)$")
#: Host code that loads or copies input (the data loader, collation, pinning, copies).
INPUT_CODE = re.compile(
    r"DataLoader|dataloader|data_loader|_next_data|__next__|collate|pin_memory|get_batch|"
    r"load_batch|next_batch|aten::to\b|aten::_to_copy|aten::copy_|Memcpy|memcpy",
)


@dataclass
class Window:
    """One analysed window: its time, its path model and its device work."""

    name: str
    start: int
    end: int
    model: PathModel
    dev: np.ndarray  # device work the window selected
    host: np.ndarray  # host slices it selected
    drivers: list[int]  # host tracks that launch its device work (and the step's own)
    device_from: int = 0  # when the device finished work from before the window (>= start)

    @cached_property
    def device_end(self) -> int:
        return int(max(self.end, self.model.trace.end[self.dev].max())) if len(self.dev) else self.end

    @cached_property
    def busy_ns(self) -> int:
        t = self.model.trace
        s, e = merge_intervals(t.ts[self.dev], t.end[self.dev])
        return int((e - s).sum())

    @property
    def elapsed_ns(self) -> int:
        """From the window's start (or, if the device was still busy with earlier work, from
        when it finished that) to the end of the window's device work."""
        return max(self.device_end - max(self.start, self.device_from), 1)


@dataclass
class Context:
    trace: Trace
    limits: AdviceLimits
    launcher: np.ndarray  # per event: the runtime call that launched it (-1: none)
    is_graph_launch: np.ndarray  # per event: a CUDA/HIP graph launch call
    step_names: list[str]  # every step (or window) of the trace, in time order
    window_ns: np.ndarray  # per step: its duration
    windows: list[Window]  # those analysed
    scale: float  # time of every window / time of those analysed
    tail: DeviceTail | None = None
    cache: dict = field(default_factory=dict)

    @property
    def has_steps(self) -> bool:
        return bool(self.step_names)

    @property
    def of_each(self) -> str:
        """How a title says "per window": of each step, or of the time."""
        return "of each step" if self.has_steps else "of the time"

    def input_intervals(self, w: Window) -> tuple[np.ndarray, np.ndarray]:
        """Merged time intervals of input code on the window's driving threads."""
        key = (w.start, w.end)
        got = self.cache.get(key)
        if got is None:
            ev = self.input_events()
            ev = ev[np.isin(self.trace.track[ev], w.drivers) & (self.trace.end[ev] > w.start)
                    & (self.trace.ts[ev] < w.device_end)]
            got = self.cache[key] = merge_intervals(self.trace.ts[ev], self.trace.end[ev])
        return got

    def input_events(self) -> np.ndarray:
        got = self.cache.get("events")
        if got is None:
            t = self.trace
            ids = [i for i, s in enumerate(t.strings.strings) if INPUT_CODE.search(s)]
            got = np.flatnonzero(np.isin(t.name, ids) & t.is_slice & ~t.on_device) if ids else np.zeros(0, np.int64)
            self.cache["events"] = got
        return got


def build_context(trace: Trace, limits: AdviceLimits) -> Context:
    pairs = launch_pairs(trace)
    launcher = np.full(len(trace), -1, np.int64)
    launcher[pairs[1]] = pairs[0]
    is_graph = np.zeros(len(trace), bool)
    is_graph[graph_launches(trace)] = True
    names, spans = step_spans(trace)
    tail = DeviceTail(trace)
    windows, chosen = _windows(trace, names, spans, limits, pairs, tail, whole=False)
    if not windows:  # no steps, or steps that hold no work: the whole trace
        names, spans = _parts(trace, limits)
        windows, chosen = _windows(trace, names, spans, limits, pairs, tail, whole=True)
        steps = []
    else:
        steps = names
    durations = (spans[:, 1] - spans[:, 0]).astype(np.float64)
    analysed = float(durations[chosen].sum())
    return Context(
        trace=trace,
        limits=limits,
        launcher=launcher,
        is_graph_launch=is_graph,
        step_names=steps,
        window_ns=durations,
        windows=windows,
        tail=tail,
        scale=float(durations.sum()) / analysed if analysed > 0 else 1.0,
    )


def _windows(trace: Trace, names: list[str], spans: np.ndarray, limits: AdviceLimits, pairs, tail, *, whole: bool):
    chosen = _choose(_work_counts(trace, spans), limits)
    windows = []
    for k in chosen.tolist():
        start, end = int(spans[k, 0]), int(spans[k, 1])
        w = _window(trace, names[k], (start, end), None if whole and len(names) == 1 else (start, end), pairs, tail)
        if w is not None:
            windows.append(w)
    return windows, chosen


def _window(trace: Trace, name: str, span: tuple[int, int], window, pairs, tail: DeviceTail) -> Window | None:
    own = _track_of(trace, name)
    model = path_model(trace, window, pairs, also_drivers=() if own is None else (own,), busy=tail.union)
    if model is None:
        return None
    sel = model.sel
    on_dev = trace.on_device[sel]
    dev = sel[on_dev]
    device_from = min(tail.busy_until(span[0]), int(trace.ts[dev].min())) if len(dev) else span[0]
    return Window(name, span[0], span[1], model, dev, sel[~on_dev], model.drivers, max(device_from, span[0]))


class DeviceTail:
    """When the device finished the work begun before a time; the union of device work."""

    def __init__(self, trace: Trace):
        dev = np.flatnonzero(device_work(trace))
        dev = dev[np.argsort(trace.ts[dev], kind="stable")]
        self.starts = trace.ts[dev]
        self.ends = np.maximum.accumulate(trace.end[dev]) if len(dev) else trace.end[dev]
        self.union = merge_intervals(trace.ts[dev], trace.end[dev])
        work = dev[trace.kind[dev] != Kind.COMM]
        self.work_union = merge_intervals(trace.ts[work], trace.end[work])  # communication aside

    def busy_until(self, t0: int) -> int:
        k = int(np.searchsorted(self.starts, t0, "left")) - 1
        return int(self.ends[k]) if k >= 0 else t0


def _track_of(trace: Trace, name: str) -> int | None:
    i = trace.find_name(name)
    if i < 0:
        return None
    hits = np.flatnonzero(trace.name == i)
    return int(trace.track[hits[np.argmax(trace.dur[hits])]]) if len(hits) else None


def step_spans(trace: Trace) -> tuple[list[str], np.ndarray]:
    """The step annotations, in time order: names and (start, end) in ns."""
    strings = trace.strings.strings
    ids = [i for i, s in enumerate(strings) if _STEP.match(s)]
    if not ids:
        return [], np.zeros((0, 2), np.int64)
    hits = np.flatnonzero(np.isin(trace.name, np.array(ids, np.int32)) & trace.is_slice & ~trace.on_device)
    hits = hits[np.lexsort((-trace.dur[hits], trace.name[hits]))]
    _, first = np.unique(trace.name[hits], return_index=True)
    steps = hits[first]
    steps = steps[np.argsort(trace.ts[steps], kind="stable")]
    return [strings[trace.name[e]] for e in steps.tolist()], np.stack([trace.ts[steps], trace.end[steps]], axis=1)


def _parts(trace: Trace, limits: AdviceLimits) -> tuple[list[str], np.ndarray]:
    """A trace without steps: one window, or equal parts of about ``max_window_events``."""
    work = trace.kind_mask(*PATH_KINDS) & trace.is_slice
    n = int(work.sum())
    if not n:
        return ["trace"], np.array([trace.span()], np.int64)
    ts = np.sort(trace.ts[work])
    k = max(1, -(-n // limits.max_window_events))
    if k == 1:
        return ["trace"], np.array([[int(ts[0]), int(trace.end[work].max())]], np.int64)
    cuts = ts[(np.arange(k) * n) // k].tolist() + [int(trace.end[work].max())]
    return [f"part {i + 1} of {k}" for i in range(k)], np.array(list(zip(cuts[:-1], cuts[1:])), np.int64)


def _work_counts(trace: Trace, spans: np.ndarray) -> np.ndarray:
    """Per window: how many work events (operators, runtime calls, device work) start in it."""
    if not len(spans):
        return np.zeros(0, np.int64)
    work = trace.kind_mask(*PATH_KINDS) & trace.is_slice
    ts = trace.ts[work]
    k = np.searchsorted(spans[:, 0], ts, "right") - 1
    inside = (k >= 0) & (ts < spans[np.maximum(k, 0), 1])
    return np.bincount(k[inside], minlength=len(spans))


def _choose(counts: np.ndarray, limits: AdviceLimits) -> np.ndarray:
    """The windows analysed: all if they fit, else evenly spaced ones that do."""
    n = len(counts)
    if not n:
        return np.zeros(0, np.int64)
    if n <= limits.max_windows and counts.sum() <= limits.max_window_events:
        return np.arange(n)
    mean = max(float(counts.mean()), 1.0)
    k = int(max(1, min(limits.max_windows, n, limits.max_window_events // mean)))
    return np.unique(np.linspace(0, n - 1, k).round().astype(np.int64))


def device_work(trace: Trace) -> np.ndarray:
    """Mask of device work slices (kernels, copies, fills, collectives)."""
    return trace.on_device & trace.is_slice & trace.kind_mask(*DEVICE_KINDS)
