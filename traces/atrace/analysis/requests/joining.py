"""Requests joined to the engine steps that served them.

A request is an OpenTelemetry trace: its root span (``llm_request`` or whatever has no parent
among its spans) and children named for its phases (``queue``, ``prefill``, ``decode``); where
a service sends only the root (vLLM), its ``gen_ai.latency.*`` attributes give the phases.

An engine step is an annotation on a host thread (``engine_step#N``, or a name carrying the
batch: ``engine_step#N|id:tokens,id:tokens``). Its work is the device time of the kernels it
launched (matched by correlation id), or, on a trace with no device (a CPU run), its own
duration on the host. The join finds each step's batch:

* ``ids``: the step names its requests (annotation args ``request_ids`` and ``tokens``, or
  the name) — exact, confidence ``high``;
* ``time``: no ids in the trace: a request is in every step on the serving thread that
  overlaps its prefill or decode, with its prompt's tokens in the steps of its prefill and
  one token a step after — confidence ``medium`` when the spans name the serving process and
  thread and they are found in the trace, else ``low``.

Each step's work is apportioned across its batch by tokens, in whole nanoseconds that sum
exactly to the step's work (largest remainders), never charged whole to every request.
"""

from __future__ import annotations

import gc
import re
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from itertools import repeat

import numpy as np
import orjson

from traces.atrace.errors import TraceError
from traces.atrace.io.otlp import SpanRow
from traces.atrace.model.trace import DEVICE_KINDS, Kind, Trace

__all__ = ["Requests", "Steps", "Join", "requests_from_spans", "find_steps", "join", "RequestJoinError"]

STEP_NAME = re.compile(r"^(engine_step|serve_step|model_step|execute_model)\b")
PHASES = ("queue", "prefill", "decode")
_TOKENS_IN = ("gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens")
_TOKENS_OUT = ("gen_ai.usage.output_tokens", "gen_ai.usage.completion_tokens")
HOUR_NS = 3600 * 10**9


@contextmanager
def _no_gc() -> Iterator[None]:
    """Pause the cyclic garbage collector while a pass makes millions of small objects that
    hold no cycles (decoded args, span rows): its passes over them cost more than the pass."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


class RequestJoinError(TraceError):
    """Spans and trace that cannot be joined; the message says why."""


def _first(attrs: dict, keys) -> int:
    for k in keys:
        v = attrs.get(k)
        if isinstance(v, int | float) and not isinstance(v, bool):
            return int(v)
    return 0


@dataclass
class Requests:
    """One row per request (arrays), times in epoch ns; a phase not seen is -1."""

    ids: list[str]
    otel_trace_ids: list[str]
    start: np.ndarray
    end: np.ndarray
    phase_start: dict[str, np.ndarray]
    phase_end: dict[str, np.ndarray]
    prompt_tokens: np.ndarray
    output_tokens: np.ndarray
    error: np.ndarray
    serving: tuple[str, str]  # (process, thread) the spans name, or ("", "")

    def __len__(self) -> int:
        return len(self.ids)

    def phase_ns(self, phase: str) -> np.ndarray:
        s, e = self.phase_start[phase], self.phase_end[phase]
        return np.where(s >= 0, np.maximum(e - s, 0), 0)

    @property
    def latency(self) -> np.ndarray:
        return self.end - self.start


def _phases_from_attrs(root: SpanRow) -> dict[str, tuple[int, int]]:
    """vLLM's single span: phases from its gen_ai.latency.* attributes (seconds)."""
    a = root.attributes
    queue = a.get("gen_ai.latency.time_in_queue")
    prefill = a.get("gen_ai.latency.time_in_model_prefill")
    decode = a.get("gen_ai.latency.time_in_model_decode")
    out, t = {}, root.start_ns
    for name, value in (("queue", queue), ("prefill", prefill), ("decode", decode)):
        if isinstance(value, int | float):
            out[name] = (t, t + int(value * 1e9))
            t += int(value * 1e9)
    return out


def requests_from_spans(spans: list[SpanRow]) -> Requests:
    """Group spans into requests (one per OTel trace with a root span)."""
    with _no_gc():
        return _requests_from_spans(spans)


def _requests_from_spans(spans: list[SpanRow]) -> Requests:
    groups: dict[str, list[SpanRow]] = defaultdict(list)
    for s in spans:
        groups[s.trace_id].append(s)
    rows = []
    serving = ("", "")
    for trace_id, group in groups.items():
        ids = {s.span_id for s in group}
        roots = [s for s in group if not s.parent_span_id or s.parent_span_id not in ids]
        if not roots:
            continue
        root = min(roots, key=lambda s: s.start_ns)
        phases = {}
        for s in group:
            if s is not root and s.name.rsplit(".", 1)[-1].lower() in PHASES:
                phases[s.name.rsplit(".", 1)[-1].lower()] = (s.start_ns, s.end_ns)
        if not phases:
            phases = _phases_from_attrs(root)
        rid = root.request_id or next((s.request_id for s in group if s.request_id), "") or trace_id
        if serving == ("", ""):
            serving = (str(root.resource.get("process.pid", "")), str(root.resource.get("thread.name", "")))
        rows.append((rid, trace_id, root, phases))
    rows.sort(key=lambda r: (r[2].start_ns, r[0]))
    n = len(rows)

    def col(fn, dtype=np.int64):
        return np.fromiter((fn(r) for r in rows), dtype=dtype, count=n)

    return Requests(
        ids=[r[0] for r in rows], otel_trace_ids=[r[1] for r in rows],
        start=col(lambda r: r[2].start_ns), end=col(lambda r: max(r[2].end_ns, r[2].start_ns)),
        phase_start={p: col(lambda r, p=p: r[3].get(p, (-1, -1))[0]) for p in PHASES},
        phase_end={p: col(lambda r, p=p: r[3].get(p, (-1, -1))[1]) for p in PHASES},
        prompt_tokens=col(lambda r: _first(r[2].attributes, _TOKENS_IN)),
        output_tokens=col(lambda r: _first(r[2].attributes, _TOKENS_OUT)),
        error=col(lambda r: r[2].status_code == 2, bool),
        serving=serving,
    )


@dataclass
class Steps:
    """Engine steps found in a trace (sorted by start), their work and how it was measured."""

    event: np.ndarray  # event index of each step's annotation
    start: np.ndarray
    end: np.ndarray
    track: np.ndarray
    work: np.ndarray  # ns
    basis: str  # "device" (kernels of the step) or "host" (the step on its thread)
    work_event: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # events of the work
    work_step: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # their step

    def __len__(self) -> int:
        return len(self.event)


def _step_events(trace: Trace) -> np.ndarray:
    names = trace.strings.strings
    wanted = np.zeros(len(names), bool)
    for i, s in enumerate(names):
        if STEP_NAME.match(s):
            wanted[i] = True
    mask = wanted[trace.name] & (trace.kind == Kind.ANNOTATION)
    if len(trace.tracks):
        mask &= ~trace.on_device
    ev = np.flatnonzero(mask)
    return ev[np.lexsort((trace.ts[ev], trace.track[ev]))]


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


def find_steps(trace: Trace) -> Steps:
    """The engine steps of ``trace`` and the work each did."""
    ev = _step_events(trace)
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
    )


# -- membership ----------------------------------------------------------------------------
@dataclass
class Join:
    """Who was in which step with how many tokens, and each one's share of the step's work."""

    mode: str  # "ids" or "time"
    confidence: str  # "high", "medium", "low"
    pair_step: np.ndarray
    pair_req: np.ndarray  # -1: a request named by the trace but not in the spans
    pair_tokens: np.ndarray
    pair_share: np.ndarray  # ns, integer; per step sums to the step's work
    step_tokens: np.ndarray
    unknown_ids: int
    clock_offset_ns: int  # added to trace times to get epoch ns
    note: str = ""


def _step_batches(trace: Trace, steps: Steps) -> list[tuple[list, list] | None]:
    """Each step's (request ids, tokens), or None where it names none: the args of all steps
    decoded in one pass (one JSON array), names parsed only where args say nothing."""
    store = trace.args
    raws = [store.raw(int(ev)) if len(store) else b"" for ev in steps.event.tolist()]
    with _no_gc():
        decoded = orjson.loads(b"[" + b",".join(bytes(r) if r else b"{}" for r in raws) + b"]") if raws else []
    out = []
    for ev, args in zip(steps.event.tolist(), decoded, strict=True):
        ids = args.get("request_ids")
        if isinstance(ids, list):
            tokens = args.get("tokens")
            out.append((ids, tokens if isinstance(tokens, list) and len(tokens) == len(ids) else [1] * len(ids)))
        else:
            out.append(_batch_of_name(trace.strings[int(trace.name[ev])]))
    return out


def _batch_of_name(name: str) -> tuple[list, list] | None:
    if "|" not in name:
        return None
    ids, tokens = [], []
    for part in name.split("|", 1)[1].split(","):
        rid, _, tok = part.strip().rpartition(":")
        if rid:
            ids.append(rid)
            tokens.append(max(int(tok), 1) if tok.isdigit() else 1)
    return ids, tokens


def _membership_by_ids(trace: Trace, steps: Steps, requests: Requests):
    index = {rid: i for i, rid in enumerate(requests.ids)}
    with _no_gc():
        return _pairs_by_ids(trace, steps, index)


def _pairs_by_ids(trace: Trace, steps: Steps, index: dict[str, int]):
    ids: list = []
    tokens: list = []
    counts = np.zeros(len(steps), np.int64)
    for k, batch in enumerate(_step_batches(trace, steps)):
        if batch is not None:
            ids.extend(batch[0])
            tokens.extend(batch[1])
            counts[k] = len(batch[0])
    if not all(isinstance(rid, str) for rid in ids):
        ids = [str(rid) for rid in ids]  # ids sent as numbers match the spans' string ids
    pair_req = np.fromiter(map(index.get, ids, repeat(-1)), np.int64, count=len(ids))
    unknown = len({ids[k] for k in np.flatnonzero(pair_req < 0).tolist()})
    pair_step = np.repeat(np.arange(len(steps)), counts)
    try:
        pair_tokens = np.maximum(np.asarray(tokens, dtype=np.int64), 1)
    except (TypeError, ValueError):
        raise RequestJoinError("a step's tokens are not whole numbers") from None
    return pair_step, pair_req, pair_tokens, unknown


def _serving_track(trace: Trace, steps: Steps, serving: tuple[str, str]) -> tuple[int, bool]:
    """The thread whose steps serve the requests: the one the spans name if found, else
    the one with the most steps."""
    tracks = np.unique(steps.track)
    pid, thread = serving
    for t in tracks.tolist():
        tr = trace.tracks[t]
        if (pid and str(tr.pid) == pid) and (not thread or thread in (str(tr.tid), tr.thread_name)):
            return t, True
    counts = np.bincount(steps.track)
    return int(np.argmax(counts)), False


def _membership_by_time(steps: Steps, requests: Requests, offset: int, track: int):
    on = np.flatnonzero(steps.track == track)
    s_start, s_end = steps.start[on] + offset, steps.end[on] + offset
    active_from = np.where(requests.phase_start["prefill"] >= 0, requests.phase_start["prefill"],
                           np.where(requests.phase_end["queue"] >= 0, requests.phase_end["queue"], requests.start))
    lo = np.searchsorted(s_end, active_from, side="right")
    hi = np.searchsorted(s_start, requests.end, side="left")
    counts = np.maximum(hi - lo, 0)
    pair_req = np.repeat(np.arange(len(requests)), counts)
    first = np.repeat(lo, counts)
    within = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
    pos = first + within
    pair_step = on[pos]
    prefill_end = requests.phase_end["prefill"][pair_req]
    in_prefill = (prefill_end >= 0) & (s_start[pos] < prefill_end)
    prompt = np.maximum(requests.prompt_tokens[pair_req], 1)
    pair_tokens = np.where(in_prefill, prompt, 1)
    return pair_step, pair_req, pair_tokens.astype(np.int64)


def apportion(work: np.ndarray, pair_step: np.ndarray, pair_tokens: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Integer shares of each step's work by tokens (largest remainders): the shares of a
    step sum exactly to its work. Returns (shares, tokens per step)."""
    n = len(work)
    step_tokens = np.bincount(pair_step, weights=pair_tokens, minlength=n).astype(np.int64)
    if not len(pair_step):
        return np.zeros(0, np.int64), step_tokens
    w = work[pair_step].astype(np.int64)
    total = np.maximum(step_tokens[pair_step], 1)
    exact = w * pair_tokens  # fits in int64: work < 2^40 ns, tokens < 2^20
    share = exact // total
    frac = exact - share * total
    given = np.bincount(pair_step, weights=share, minlength=n).astype(np.int64)
    left = work - given
    left[step_tokens == 0] = 0
    order = np.lexsort((-frac / total, pair_step))
    starts = np.searchsorted(pair_step[order], np.arange(n))
    rank = np.arange(len(order)) - starts[pair_step[order]]
    bump = rank < left[pair_step[order]]
    share[order[bump]] += 1
    return share, step_tokens


def _clock_offset(trace: Trace, steps: Steps, requests: Requests) -> tuple[int, str]:
    if not len(steps) or not len(requests):
        return 0, ""
    gap = int(requests.start.min()) - int(steps.start.min())
    if abs(gap) < HOUR_NS:
        return 0, ""
    base = trace.meta.get("baseTimeNanoseconds")
    if isinstance(base, int | float) and abs(int(requests.start.min()) - int(steps.start.min() + base)) < HOUR_NS:
        return int(base), "trace clock aligned by its baseTimeNanoseconds"
    raise RequestJoinError(
        f"the spans and the trace are {gap / 1e9:.0f} s apart and the trace gives no base time: "
        "they are not from the same run, or their clocks differ"
    )


def join(trace: Trace, requests: Requests, steps: Steps | None = None, *, mode: str = "auto") -> Join:
    """Join ``requests`` to the steps of ``trace`` (``mode``: auto, ids or time)."""
    if mode not in ("auto", "ids", "time"):
        raise RequestJoinError(f"mode must be auto, ids or time, not {mode!r}")
    steps = steps if steps is not None else find_steps(trace)
    if not len(steps):
        raise RequestJoinError("the trace has no engine steps (annotations named engine_step#N)")
    offset, note = _clock_offset(trace, steps, requests)
    pair_step = np.zeros(0, np.int64)
    unknown, confidence = 0, "high"
    if mode in ("auto", "ids"):
        pair_step, pair_req, pair_tokens, unknown = _membership_by_ids(trace, steps, requests)
        if mode == "ids" and not len(pair_step):
            raise RequestJoinError("the trace's steps name no requests (no request_ids in their args or names)")
    if not len(pair_step):
        mode = "time"
        track, named = _serving_track(trace, steps, requests.serving)
        pair_step, pair_req, pair_tokens = _membership_by_time(steps, requests, offset, track)
        confidence = "medium" if named else "low"
    else:
        mode = "ids"
    share, step_tokens = apportion(steps.work, pair_step, pair_tokens)
    return Join(mode, confidence, pair_step, pair_req, pair_tokens, share, step_tokens, unknown, offset, note)


def dumps_batch_name(step: int, ids: list[str], tokens: list[int]) -> str:
    """A step's name that carries its batch, for profilers whose annotations take no args."""
    return f"engine_step#{step}|" + ",".join(f"{i}:{t}" for i, t in zip(ids, tokens, strict=True))

