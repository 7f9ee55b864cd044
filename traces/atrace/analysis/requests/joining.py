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
from collections import Counter, defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from itertools import repeat

import numpy as np
import orjson

from traces.atrace.analysis.requests.grammars import known_forms
from traces.atrace.analysis.requests.steps import Steps, find_steps
from traces.atrace.errors import TraceError
from traces.atrace.io.otlp import SpanRow
from traces.atrace.model.trace import Trace

__all__ = ["Requests", "Steps", "Join", "requests_from_spans", "find_steps", "join", "RequestJoinError"]

PHASES = ("queue", "prefill", "decode")
#: Child span names of each phase (the last dotted part, any case): ours and OpenTelemetry
#: GenAI's, SGLang's request stages (prefill_waiting, prefill_forward, chunked_prefill,
#: decode_loop…). A phase named by several spans is their whole extent.
PHASE_SPANS = {
    "queue": "queue", "queued": "queue", "waiting": "queue", "prefill_waiting": "queue",
    "prefill": "prefill", "prefill_forward": "prefill", "chunked_prefill": "prefill",
    "decode": "decode", "decode_loop": "decode", "decode_forward": "decode",
}
#: The request table's tokens, from the attributes the engines write (vLLM's gen_ai.usage.*,
#: OpenTelemetry GenAI's, SGLang's meta info names), looked for in this order.
TOKENS_IN = ("gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens", "prompt_tokens", "input_tokens")
TOKENS_OUT = ("gen_ai.usage.output_tokens", "gen_ai.usage.completion_tokens", "completion_tokens", "output_tokens")
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
    phase_source: list[str] = field(default_factory=list)  # "spans", "attributes" or "" a request

    def phase_sources(self) -> dict[str, int]:
        """How many requests had their phases from child spans, from latency attributes, or none."""
        return dict(Counter(s or "none" for s in self.phase_source))

    def __len__(self) -> int:
        return len(self.ids)

    def phase_ns(self, phase: str) -> np.ndarray:
        s, e = self.phase_start[phase], self.phase_end[phase]
        return np.where(s >= 0, np.maximum(e - s, 0), 0)

    @property
    def latency(self) -> np.ndarray:
        return self.end - self.start


def _seconds(attrs: dict, key: str) -> int | None:
    v = attrs.get(key)
    if isinstance(v, int | float) and not isinstance(v, bool) and 0 <= v < 1e7:
        return int(v * 1e9)
    return None


def _phases_from_attrs(root: SpanRow) -> dict[str, tuple[int, int]]:
    """vLLM's single span (arrival to finish): queue, prefill and decode one after another
    from its ``gen_ai.latency.*`` attributes (seconds). Without ``time_in_model_prefill`` the
    first token (``time_to_first_token``) ends prefill; without ``time_in_model_decode``,
    decode runs from there to the span's end."""
    a = root.attributes
    queue = _seconds(a, "gen_ai.latency.time_in_queue")
    prefill = _seconds(a, "gen_ai.latency.time_in_model_prefill")
    decode = _seconds(a, "gen_ai.latency.time_in_model_decode")
    first = _seconds(a, "gen_ai.latency.time_to_first_token")
    if queue is None and prefill is None and decode is None and first is None:
        return {}
    out, t = {}, root.start_ns
    if queue is not None:
        out["queue"] = (t, t + queue)
        t += queue
    if prefill is None and first is not None and root.start_ns + first >= t:
        prefill = root.start_ns + first - t
    if prefill is not None:
        out["prefill"] = (t, t + prefill)
        t += prefill
    if decode is None and "prefill" in out and root.end_ns > t:
        decode = root.end_ns - t
    if decode is not None:
        out["decode"] = (t, t + decode)
    return out


def _phases_from_spans(group: list[SpanRow], root: SpanRow) -> dict[str, tuple[int, int]]:
    phases: dict[str, tuple[int, int]] = {}
    for s in group:
        if s is root:
            continue
        phase = PHASE_SPANS.get(s.name.rsplit(".", 1)[-1].lower())
        if phase is not None:
            have = phases.get(phase)
            phases[phase] = (s.start_ns, s.end_ns) if have is None else (min(have[0], s.start_ns),
                                                                          max(have[1], s.end_ns))
    return phases


def _tokens(root: SpanRow, group: list[SpanRow], keys) -> int:
    """The root's count, else the first span of the request that gives one (SGLang puts
    them on its ``Req`` span under a bootstrap-room root)."""
    found = _first(root.attributes, keys)
    if found or len(group) == 1:
        return found
    return next((v for v in (_first(s.attributes, keys) for s in group) if v), 0)


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
        phases = _phases_from_spans(group, root) if len(group) > 1 else {}
        source = "spans" if phases else ""
        if not phases:
            phases = _phases_from_attrs(root)
            source = "attributes" if phases else ""
        rid = root.request_id or next((s.request_id for s in group if s.request_id), "") or trace_id
        if serving == ("", ""):
            serving = (str(root.resource.get("process.pid", "")), str(root.resource.get("thread.name", "")))
        rows.append((rid, trace_id, root, phases, source, _tokens(root, group, TOKENS_IN),
                     _tokens(root, group, TOKENS_OUT)))
    rows.sort(key=lambda r: (r[2].start_ns, r[0]))
    n = len(rows)

    def col(fn, dtype=np.int64):
        return np.fromiter((fn(r) for r in rows), dtype=dtype, count=n)

    return Requests(
        ids=[r[0] for r in rows], otel_trace_ids=[r[1] for r in rows],
        start=col(lambda r: r[2].start_ns), end=col(lambda r: max(r[2].end_ns, r[2].start_ns)),
        phase_start={p: col(lambda r, p=p: r[3].get(p, (-1, -1))[0]) for p in PHASES},
        phase_end={p: col(lambda r, p=p: r[3].get(p, (-1, -1))[1]) for p in PHASES},
        prompt_tokens=col(lambda r: r[5]), output_tokens=col(lambda r: r[6]),
        error=col(lambda r: r[2].status_code == 2, bool),
        serving=serving, phase_source=[r[4] for r in rows],
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
    check: dict = field(default_factory=dict)  # the steps' own counts against the batches found


def _step_batches(trace: Trace, steps: Steps) -> list[tuple[list, list] | None]:
    """Each step's (request ids, tokens), or None where it names none: the args of all steps
    decoded in one pass (one JSON array), names read only where args say nothing."""
    store = trace.args
    raws = [store.raw(int(ev)) if len(store) else b"" for ev in steps.event.tolist()]
    with _no_gc():
        decoded = orjson.loads(b"[" + b",".join(bytes(r) if r else b"{}" for r in raws) + b"]") if raws else []
    out = []
    for info, args in zip(steps.info, decoded, strict=True):
        ids = args.get("request_ids")
        if isinstance(ids, list):
            tokens = args.get("tokens")
            out.append((ids, tokens if isinstance(tokens, list) and len(tokens) == len(ids) else [1] * len(ids)))
        elif info.ids is not None:
            out.append((list(info.ids), list(info.id_tokens)))
        else:
            out.append(None)
    return out


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


def _overlaps(s_start: np.ndarray, s_end: np.ndarray, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(request, step position) for every step of one thread (sorted, not overlapping) that
    overlaps each request's interval [a, b); a request with a < 0 has none."""
    known = a >= 0
    b = np.where(b > a, b, a + 1)  # an instant still meets the step it falls in
    lo = np.searchsorted(s_end, a, side="right")
    hi = np.searchsorted(s_start, b, side="left")
    counts = np.where(known, np.maximum(hi - lo, 0), 0)
    req = np.repeat(np.arange(len(a)), counts)
    within = np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts, counts)
    return req, np.repeat(lo, counts) + within


def phase_intervals(requests: Requests) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per request, when it was in prefill and in decode (epoch ns, -1 where unknown), and
    for a request whose spans give no phase, when it was in flight (``any``)."""
    ps, pe = requests.phase_start["prefill"], requests.phase_end["prefill"]
    ds, de = requests.phase_start["decode"], requests.phase_end["decode"]
    admitted = np.where(requests.phase_end["queue"] >= 0, requests.phase_end["queue"], requests.start)
    has_p, has_d = ps >= 0, ds >= 0
    # A missing phase is the time its neighbour leaves: prefill until decode starts, decode
    # from the end of prefill to the end of the request.
    p = (np.where(has_p, ps, np.where(has_d, admitted, -1)), np.where(has_p, pe, np.where(has_d, ds, -1)))
    d = (np.where(has_d, ds, np.where(has_p, pe, -1)), np.where(has_d, de, np.where(has_p, requests.end, -1)))
    none = ~has_p & ~has_d
    return {"prefill": p, "decode": d, "any": (np.where(none, admitted, -1), np.where(none, requests.end, -1))}


PREFILL, DECODE = 1, 2  # pair phases (and KINDS' indices of the step kinds)


def _membership_by_time(steps: Steps, requests: Requests, offset: int, track: int):
    """A step's batch: the requests whose prefill overlaps it (a step that prefills), those
    whose decode overlaps it (a step that decodes), once each; a prompt's tokens in the
    steps of its prefill, one token a decode step. Returns pairs and each pair's phase."""
    on = np.flatnonzero(steps.track == track)
    s_start, s_end = steps.start[on] + offset, steps.end[on] + offset
    kind = steps.kind[on]
    spans = phase_intervals(requests)
    p_req, p_pos = _overlaps(s_start, s_end, *spans["prefill"])
    keep = kind[p_pos] != DECODE
    p_req, p_pos = p_req[keep], p_pos[keep]
    d_req, d_pos = _overlaps(s_start, s_end, *spans["decode"])
    keep = kind[d_pos] != PREFILL
    d_req, d_pos = d_req[keep], d_pos[keep]
    # A request met by one step in both phases (its prefill ended inside it) counts once, in prefill.
    width = len(on) + 1
    both = np.isin(d_req * width + d_pos, p_req * width + p_pos)
    d_req, d_pos = d_req[~both], d_pos[~both]
    a_req, a_pos = _overlaps(s_start, s_end, *spans["any"])
    pair_req = np.concatenate([p_req, d_req, a_req])
    pos = np.concatenate([p_pos, d_pos, a_pos])
    phase = np.concatenate([np.full(len(p_req), PREFILL), np.full(len(d_req), DECODE), np.zeros(len(a_req), np.int64)])
    prompt = np.maximum(requests.prompt_tokens[pair_req], 1)
    pair_tokens = np.where(phase == PREFILL, prompt, 1).astype(np.int64)
    return on[pos], pair_req, pair_tokens, phase


def check_counts(steps: Steps, requests: Requests, pair_step: np.ndarray, phase: np.ndarray, offset: int,
                 track: int, limit: int = 5) -> dict:
    """The batches found by time against what the steps' names say (batch size, requests in
    prefill and in decode), over the serving thread's steps while the spans were in flight."""
    n = len(steps)
    found = np.bincount(pair_step, minlength=n)
    found_p = np.bincount(pair_step[phase == PREFILL], minlength=n)
    found_d = np.bincount(pair_step[phase == DECODE], minlength=n)
    batch, prefill, decode = steps.facts("batch"), steps.facts("prefill"), steps.facts("decode")
    said = (batch >= 0) | (prefill >= 0) | (decode >= 0)
    in_flight = np.zeros(n, bool)
    if len(requests):
        in_flight = (steps.end + offset > requests.start.min()) & (steps.start + offset < requests.end.max())
    checked = said & in_flight & (steps.track == track)
    phased = bool((phase != 0).any()) if len(phase) else False
    off_batch = (batch >= 0) & (found != batch)
    off_prefill = phased & (prefill >= 0) & (found_p != prefill)
    off_decode = phased & (decode >= 0) & (found_d != decode)
    wrong = np.flatnonzero(checked & (off_batch | off_prefill | off_decode))
    examples = []
    for k in wrong[:limit].tolist():
        errs = [f"batch {batch[k]}, found {found[k]}"] if off_batch[k] else []
        errs += [f"prefill {prefill[k]}, found {found_p[k]}"] if off_prefill[k] else []
        errs += [f"decode {decode[k]}, found {found_d[k]}"] if off_decode[k] else []
        examples.append({"step": k, "event": int(steps.event[k]), "grammar": steps.info[k].grammar,
                         "says": "; ".join(errs)})
    n_checked = int(checked.sum())
    return {"steps_checked": n_checked, "steps_matching": n_checked - len(wrong), "mismatches": len(wrong),
            "examples": examples}


LEVELS = ("low", "medium", "high")


def _confidence(named: bool, check: dict) -> str:
    """By time: medium when the spans name the serving thread and it is found, else low; one
    level up when every step's own counts confirm its batch, one down when any does not."""
    level = 1 if named else 0
    if check["steps_checked"]:
        level += 1 if not check["mismatches"] else -1
    return LEVELS[max(0, min(level, 2))]


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
        raise RequestJoinError(f"the trace has no engine steps: no host annotation is named as a step grammar "
                               f"says. {known_forms()}")
    offset, note = _clock_offset(trace, steps, requests)
    pair_step = np.zeros(0, np.int64)
    unknown, confidence, check = 0, "high", {}
    if mode in ("auto", "ids"):
        pair_step, pair_req, pair_tokens, unknown = _membership_by_ids(trace, steps, requests)
        if mode == "ids" and not len(pair_step):
            raise RequestJoinError("the trace's steps name no requests (no request_ids in their args or names)")
    if not len(pair_step):
        mode = "time"
        track, named = _serving_track(trace, steps, requests.serving)
        pair_step, pair_req, pair_tokens, phase = _membership_by_time(steps, requests, offset, track)
        check = check_counts(steps, requests, pair_step, phase, offset, track)
        confidence = _confidence(named, check)
    else:
        mode = "ids"
    share, step_tokens = apportion(steps.work, pair_step, pair_tokens)
    return Join(mode, confidence, pair_step, pair_req, pair_tokens, share, step_tokens, unknown, offset, note, check)


def dumps_batch_name(step: int, ids: list[str], tokens: list[int]) -> str:
    """A step's name that carries its batch, for profilers whose annotations take no args."""
    return f"engine_step#{step}|" + ",".join(f"{i}:{t}" for i, t in zip(ids, tokens, strict=True))

