"""Engine steps in a trace: the host annotations a step grammar reads
(:mod:`traces.atrace.analysis.requests.grammars`), what each one's name says, and the work
each did: the device time of the kernels, copies and graph replays it launched (on any
stream, by correlation id), or its own time on the host in a trace with no device."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from traces.atrace.analysis.requests.grammars import KINDS, StepInfo, match
from traces.atrace.model.trace import DEVICE_KINDS, Kind, Trace

__all__ = ["Steps", "find_steps"]


@dataclass
class Steps:
    """Engine steps found in a trace (sorted by start), their work and how it was measured,
    and what each one's name says (its grammar, kind, batch size, requests of each phase)."""

    event: np.ndarray  # event index of each step's annotation (the outermost where names nest)
    start: np.ndarray
    end: np.ndarray
    track: np.ndarray
    work: np.ndarray  # ns
    basis: str  # "device" (kernels of the step) or "host" (the step on its thread)
    work_event: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # events of the work
    work_step: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # their step
    info: list[StepInfo] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # names of one step that disagree

    def __len__(self) -> int:
        return len(self.event)

    def facts(self, name: str) -> np.ndarray:
        """One fact of every step's name (batch, prefill, decode, tokens…; -1 where unsaid)."""
        return np.fromiter((getattr(i, name) for i in self.info), np.int64, count=len(self.info))

    @property
    def kind(self) -> np.ndarray:
        """Per step: 0 any, 1 prefill, 2 decode, 3 mixed."""
        return np.fromiter((KINDS.index(i.kind) for i in self.info), np.int64, count=len(self.info))

    def grammars(self) -> dict[str, int]:
        """The grammars the steps' names were read by, and how many steps each."""
        return dict(Counter(i.grammar for i in self.info))


def _step_events(trace: Trace, table) -> tuple[np.ndarray, list[StepInfo], list[str]]:
    """The step annotations (sorted by track, then start) and what their names say. An
    annotation inside another step's on the same thread names the same step: it is folded
    into the outer one (its facts complete the outer's; a disagreement is noted)."""
    mask = trace.kind == Kind.ANNOTATION
    if len(trace.tracks):
        mask &= ~trace.on_device
    candidates = np.flatnonzero(mask)
    strings = trace.strings.strings
    said = {}
    for i in np.unique(trace.name[candidates]).tolist():
        info = match(strings[i], table)
        if info is not None:
            said[i] = info
    if not said:
        return np.zeros(0, np.int64), [], []
    wanted = np.zeros(len(strings), bool)
    wanted[list(said)] = True
    ev = candidates[wanted[trace.name[candidates]]]
    ev = ev[np.lexsort((-trace.dur[ev], trace.ts[ev], trace.track[ev]))]
    ts, end, track = trace.ts[ev], trace.end[ev], trace.track[ev]
    # An annotation that starts inside an earlier one on its thread is nested in it.
    earlier_end = np.full(len(ev), np.iinfo(np.int64).min, np.int64)
    bounds = np.flatnonzero(np.r_[True, track[1:] != track[:-1], True])
    for lo, hi in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True):
        earlier_end[lo + 1 : hi] = np.maximum.accumulate(end[lo : hi - 1])
    nested = ts < earlier_end
    keep = ev[~nested]
    infos = [said[n] for n in trace.name[keep].tolist()]
    notes: list[str] = []
    if nested.any():
        owner = np.cumsum(~nested) - 1  # per annotation, the kept step it belongs to
        for k in np.flatnonzero(nested).tolist():
            step, inner = int(owner[k]), said[int(trace.name[ev[k]])]
            differ = infos[step].disagrees(inner)
            if differ:
                notes.append(f"{strings[int(trace.name[keep[step]])][:60]} and {strings[int(trace.name[ev[k]])][:60]} "
                             f"disagree: {', '.join(differ)}")
            infos[step] = infos[step].merged(inner)
    return keep, infos, notes


def _containing_step(steps_ev: np.ndarray, trace: Trace, events: np.ndarray) -> np.ndarray:
    """For each event, the position (in ``steps_ev``, sorted by track then start) of the
    step on its track that holds its start, or -1."""
    out = np.full(len(events), -1, np.int64)
    s_track = trace.track[steps_ev]
    e_track = trace.track[events]
    for track in np.unique(s_track).tolist():
        first = int(np.searchsorted(s_track, track, side="left"))
        last = int(np.searchsorted(s_track, track, side="right"))
        on = np.flatnonzero(e_track == track)
        starts, ends = trace.ts[steps_ev[first:last]], trace.end[steps_ev[first:last]]
        pos = np.searchsorted(starts, trace.ts[events[on]], side="right") - 1
        ok = (pos >= 0) & (trace.ts[events[on]] < ends[np.maximum(pos, 0)])
        out[on[ok]] = first + pos[ok]
    return out


def find_steps(trace: Trace, table=None) -> Steps:
    """The engine steps of ``trace`` (annotations a step grammar reads), and the work each
    did: the device time of the kernels, copies and graph replays launched inside it (on
    any stream, by correlation id), or its own time on the host in a trace with no device."""
    ev, infos, notes = _step_events(trace, table)
    order = np.argsort(trace.ts[ev], kind="stable")
    ev_sorted_by_track = ev  # sorted by (track, ts) for the containment search
    n = len(ev)
    work = np.zeros(n, np.int64)
    basis = "host"
    work_event, work_step = np.zeros(0, np.int64), np.zeros(0, np.int64)
    device = trace.kind_mask(*DEVICE_KINDS) & trace.on_device & (trace.corr >= 0)
    if n and device.any():
        runtime = np.flatnonzero((trace.kind == Kind.RUNTIME) & (trace.corr >= 0) & ~trace.on_device)
        launch_step = _containing_step(ev_sorted_by_track, trace, runtime)
        keep = launch_step >= 0
        runtime, launch_step = runtime[keep], launch_step[keep]
        corr_order = np.argsort(trace.corr[runtime], kind="stable")
        corr_sorted = trace.corr[runtime][corr_order]
        dev = np.flatnonzero(device)
        pos = np.searchsorted(corr_sorted, trace.corr[dev])
        pos_c = np.minimum(pos, max(len(corr_sorted) - 1, 0))
        hit = (pos < len(corr_sorted)) & (corr_sorted[pos_c] == trace.corr[dev]) if len(corr_sorted) else np.zeros(len(dev), bool)
        work_event = dev[hit]
        work_step = launch_step[corr_order[pos_c[hit]]]
        work = np.bincount(work_step, weights=trace.dur[work_event], minlength=n).astype(np.int64)
        basis = "device"
    if basis == "host" and n:
        work = trace.dur[ev].astype(np.int64)
    # Re-order everything by start time.
    rank = np.empty(n, np.int64)
    rank[order] = np.arange(n)
    return Steps(
        event=ev[order], start=trace.ts[ev][order], end=trace.end[ev][order], track=trace.track[ev][order],
        work=work[order], basis=basis, work_event=work_event, work_step=rank[work_step] if len(work_step) else work_step,
        info=[infos[k] for k in order.tolist()], notes=notes,
    )
