"""Why was a request slow: its time split, its share of the device, its cause in words.

For every request of a join (:mod:`traces.atrace.analysis.requests.joining`): its time split into
queue / prefill / decode / other, its apportioned share of the steps' work, and the time
each known cause added to it, over what a typical request of the same capture saw:

* ``queue``: queued longer than the median (behind a full batch when the batch was full);
* ``prefill_interference``: its decode steps shared the device with a long prefill (a step
  holding another request's prompt of ``LIMITS.long_prefill_tokens`` or more);
* ``host_stall``: the engine stopped stepping on the host (a gap between steps far over
  the usual one) while it was in flight;
* ``throttled``: the device was throttled (clock under ``LIMITS.throttled_clock`` of its
  maximum, or at ``LIMITS.hot_c``) during its steps — the only cause that blames the device;
* ``long_prompt``, ``long_output``: its own size.

The largest cause is its reason, said in words. Thresholds live in :data:`LIMITS`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from traces.atrace.analysis.requests.grammars import version as grammar_table_version
from traces.atrace.analysis.requests.joining import Join, Requests, Steps, _no_gc
from traces.atrace.model.trace import Kind, Trace

__all__ = ["Health", "Limits", "LIMITS", "report", "request_detail", "CAUSES", "DEVICE_CAUSES"]

CAUSES = ("queue", "prefill_interference", "host_stall", "throttled", "long_prompt", "long_output")
DEVICE_CAUSES = ("throttled",)


@dataclass(frozen=True)
class Limits:
    long_prefill_tokens: int = 2048
    throttled_clock: float = 0.9
    hot_c: float = 90.0
    stall_min_ms: float = 20.0  # a gap between steps at least this long (and 10× the usual) is a stall
    min_share: float = 0.10  # a cause is named when it added at least this share of the latency
    worst: int = 10


LIMITS = Limits()


@dataclass
class Health:
    """The device's health over time (epoch ns): from the time-series store or the trace."""

    ts: np.ndarray
    temperature_c: np.ndarray
    clock_share: np.ndarray  # clock over its maximum, 0..1 (NaN when unknown)

    @classmethod
    def from_trace(cls, trace: Trace, offset_ns: int = 0) -> Health | None:
        counters = np.flatnonzero(trace.kind == Kind.COUNTER)
        rows = []
        for i in counters.tolist():
            args = trace.args.get(i)
            if "temperature_c" in args or "clock_share" in args:
                rows.append((int(trace.ts[i]) + offset_ns, float(args.get("temperature_c", np.nan)),
                             float(args.get("clock_share", np.nan))))
        if not rows:
            return None
        rows.sort()
        return cls(*(np.array(c) for c in zip(*rows, strict=True)))

    def at(self, t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        pos = np.clip(np.searchsorted(self.ts, t, side="right") - 1, 0, len(self.ts) - 1)
        return self.temperature_c[pos], self.clock_share[pos]


def _ms(ns) -> float:
    return round(float(ns) / 1e6, 3)


@dataclass
class _Context:
    trace: Trace
    requests: Requests
    steps: Steps
    join: Join
    health: Health | None
    limits: Limits

    def __post_init__(self) -> None:
        j, s = self.join, self.steps
        self.offset = j.clock_offset_ns
        self.step_dur = (s.end - s.start).astype(np.int64)
        known = j.pair_req >= 0
        self.pr, self.ps, self.pt, self.share = j.pair_req[known], j.pair_step[known], j.pair_tokens[known], j.pair_share[known]
        self.batch = np.bincount(j.pair_step, minlength=len(s))
        self.step_max_tokens = np.zeros(len(s), np.int64)
        np.maximum.at(self.step_max_tokens, j.pair_step, j.pair_tokens)
        self.big = self.step_max_tokens >= self.limits.long_prefill_tokens
        plain = self.step_dur[~self.big]
        self.typical_step = float(np.median(plain)) if len(plain) else float(np.median(self.step_dur))
        temp, clock = (self.health.at(s.start + self.offset) if self.health is not None
                       else (np.full(len(s), np.nan), np.full(len(s), np.nan)))
        self.step_temp, self.step_clock = temp, clock
        self.wait_from = _backlog_start(self.requests)
        self.phase = {p: self.requests.phase_ns(p) for p in ("queue", "prefill", "decode")}
        self.latency = self.requests.latency


def _backlog_start(r: Requests) -> np.ndarray:
    """Per request: when the queue it joined last was empty (the start of the backlog it
    waited behind; its arrival if none)."""
    admitted = np.where(r.phase_end["queue"] >= 0, r.phase_end["queue"], r.start)
    times = np.concatenate([r.start, admitted])
    delta = np.concatenate([np.ones(len(r), np.int64), -np.ones(len(r), np.int64)])
    order = np.lexsort((delta, times))  # at equal times an admission goes first
    waiting = np.cumsum(delta[order])
    empty_at = times[order][waiting == 0]
    if not len(empty_at):
        return r.start.copy()
    pos = np.searchsorted(empty_at, r.start, side="right") - 1
    return np.where(pos >= 0, empty_at[np.maximum(pos, 0)], r.start)


def _excess(ctx: _Context) -> dict[str, np.ndarray]:
    r, n = ctx.requests, len(ctx.requests)
    lim = ctx.limits
    out = {}
    queue = r.phase_ns("queue")
    out["queue"] = np.maximum(queue - np.median(queue), 0) if n else queue
    # Time a cause cost the engine while the request waited in the queue counts for it too:
    # a queue that built up behind a stall, a long prefill or a slow device is that cause's.
    big_extra = np.maximum(ctx.step_dur - ctx.typical_step, 0) * ctx.big
    decode_pair = (ctx.pt < lim.long_prefill_tokens) & ctx.big[ctx.ps]
    extra = big_extra[ctx.ps] * decode_pair
    out["prefill_interference"] = np.bincount(ctx.pr, weights=extra, minlength=n) + _while_waiting(ctx, big_extra)
    out["host_stall"] = _stall_excess(ctx)
    clock = np.nan_to_num(ctx.step_clock, nan=1.0)
    hot = np.nan_to_num(ctx.step_temp, nan=0.0) >= lim.hot_c
    slow = np.where(clock < 1.0, ctx.step_dur * (1.0 - clock), np.maximum(ctx.step_dur - ctx.typical_step, 0))
    slow = slow * ((clock < lim.throttled_clock) | hot)
    out["throttled"] = np.bincount(ctx.pr, weights=slow[ctx.ps], minlength=n) + _while_waiting(ctx, slow)
    prefill = r.phase_ns("prefill")
    out["long_prompt"] = np.maximum(prefill - np.median(prefill), 0) * (r.prompt_tokens >= lim.long_prefill_tokens)
    tokens = r.output_tokens.astype(float)
    out["long_output"] = np.maximum(tokens - np.median(tokens), 0) * ctx.typical_step if n else tokens
    return out


def _while_waiting(ctx: _Context, per_step: np.ndarray) -> np.ndarray:
    """Per request: the sum of ``per_step`` over the steps that started while it, or the
    backlog it joined, was queued."""
    r = ctx.requests
    if not len(r) or not len(per_step):
        return np.zeros(len(r))
    order = np.argsort(ctx.steps.start)
    start = ctx.steps.start[order] + ctx.offset
    cum = np.concatenate([[0.0], np.cumsum(per_step[order])])
    queued_until = np.where(r.phase_end["queue"] >= 0, r.phase_end["queue"], r.start)
    lo = np.searchsorted(start, ctx.wait_from, side="left")
    hi = np.searchsorted(start, queued_until, side="left")
    return np.maximum(cum[np.maximum(hi, lo)] - cum[lo], 0)


def _stall_excess(ctx: _Context) -> np.ndarray:
    s, r = ctx.steps, ctx.requests
    order = np.argsort(s.start)
    start, end = s.start[order] + ctx.offset, s.end[order] + ctx.offset
    gaps = start[1:] - end[:-1]
    if not len(gaps):
        return np.zeros(len(r))
    usual = max(float(np.median(gaps)), 1.0)
    limit = max(10 * usual, ctx.limits.stall_min_ms * 1e6)
    stall = np.where(gaps >= limit, gaps, 0).astype(float)
    cum = np.concatenate([[0.0], np.cumsum(stall)])
    # Gaps that start after the request arrived and end before it finished.
    lo = np.searchsorted(end[:-1], ctx.wait_from, side="left")
    hi = np.searchsorted(start[1:], r.end, side="right")
    return np.maximum(cum[np.maximum(hi, lo)] - cum[lo], 0)


def _words(ctx: _Context, i: int, cause: str, excess: float) -> str:
    r = ctx.requests
    if cause == "queue":
        return f"queued {_ms(r.phase_ns('queue')[i]):.0f} ms behind {_batch_words(ctx, i)}"
    mine = ctx.pr == i
    if cause == "prefill_interference":
        big = int(ctx.step_max_tokens[ctx.ps[mine]].max())
        k = int((ctx.big[ctx.ps[mine]] & (ctx.pt[mine] < ctx.limits.long_prefill_tokens)).sum())
        return f"its decode steps shared the device with a {big:,}-token prefill ({k} steps, +{excess / 1e6:.0f} ms)"
    if cause == "host_stall":
        return f"the engine stalled {excess / 1e6:.0f} ms on the host between steps while it was in flight"
    if cause == "throttled":
        temp = np.nanmax(ctx.step_temp[ctx.ps[mine]]) if mine.any() else np.nan
        clock = np.nanmin(ctx.step_clock[ctx.ps[mine]]) if mine.any() else np.nan
        parts = [f"temperature {temp:.0f} °C"] if not np.isnan(temp) else []
        parts += [f"clock at {clock * 100:.0f} %"] if not np.isnan(clock) else []
        return f"device throttled: {', '.join(parts)} (+{excess / 1e6:.0f} ms)"
    if cause == "long_prompt":
        return f"its own {int(r.prompt_tokens[i]):,}-token prompt took {_ms(r.phase_ns('prefill')[i]):.0f} ms to prefill"
    if cause == "long_output":
        return f"it generated {int(r.output_tokens[i]):,} tokens ({_ms(r.phase_ns('decode')[i]):.0f} ms of decode)"
    return "nothing stands out"


def _batch_words(ctx: _Context, i: int) -> str:
    """The batch a queued request waited behind: full when no step while it waited had room
    for one more (every step's batch as large as the largest)."""
    r = ctx.requests
    admitted = r.phase_end["queue"][i] if r.phase_end["queue"][i] >= 0 else r.start[i]
    lo = int(np.searchsorted(ctx.steps.start, r.start[i] - ctx.offset, side="left"))
    hi = int(np.searchsorted(ctx.steps.start, admitted - ctx.offset, side="left"))
    sizes = ctx.batch[lo:hi] if hi > lo else ctx.batch[max(lo - 1, 0):lo]
    if not len(sizes):
        return "a busy engine"
    small, large = int(sizes.min()), int(sizes.max())
    if small == large:
        return f"a full batch ({large} requests)"
    return f"batches of {small}-{large} requests"


def _cause(ctx: _Context, excess: dict[str, np.ndarray], i: int) -> tuple[str, str, float]:
    latency = float(ctx.requests.latency[i])
    best = max(CAUSES, key=lambda c: excess[c][i])
    value = float(excess[best][i])
    if value < ctx.limits.min_share * latency or value <= 0:
        return "none", "nothing stands out: " + _split_words(ctx.requests, i), value
    return best, _words(ctx, i, best, value), value


def _split_words(r: Requests, i: int) -> str:
    parts = [f"{p} {_ms(r.phase_ns(p)[i]):.0f} ms" for p in ("queue", "prefill", "decode") if r.phase_start[p][i] >= 0]
    return ", ".join(parts) or f"{_ms(r.latency[i]):.0f} ms"


def _row(ctx: _Context, i: int, device_ns: np.ndarray, steps_in: np.ndarray) -> dict:
    r = ctx.requests
    split = {p: _ms(ctx.phase[p][i]) for p in ("queue", "prefill", "decode")}
    split["other"] = round(max(_ms(ctx.latency[i]) - sum(split.values()), 0.0), 3)
    return {
        "index": i, "request_id": r.ids[i], "otel_trace_id": r.otel_trace_ids[i],
        "start_ns": int(r.start[i]), "end_ns": int(r.end[i]), "latency_ms": _ms(ctx.latency[i]),
        "split_ms": split, "prompt_tokens": int(r.prompt_tokens[i]), "output_tokens": int(r.output_tokens[i]),
        "steps": int(steps_in[i]), "work_ms": _ms(device_ns[i]), "error": bool(r.error[i]),
    }


def _causes(ctx: _Context, excess: dict[str, np.ndarray]) -> np.ndarray:
    """Every request's cause key at once ("none" where nothing added enough)."""
    table = np.vstack([excess[c] for c in CAUSES]) if len(ctx.requests) else np.zeros((len(CAUSES), 0))
    best = np.argmax(table, axis=0)
    value = table[best, np.arange(table.shape[1])]
    named = (value > 0) & (value >= ctx.limits.min_share * ctx.requests.latency)
    return np.where(named, np.array(CAUSES, dtype=object)[best], "none")


def request_detail(ctx: _Context, i: int, top: int = 8, excess: dict | None = None) -> dict:
    """One request in full: its row, cause, the kernels/operators that dominated its share,
    the device's health during it and its steps."""
    excess = excess if excess is not None else _excess(ctx)
    n = len(ctx.requests)
    device_ns = np.bincount(ctx.pr, weights=ctx.share, minlength=n)
    steps_in = np.bincount(ctx.pr, minlength=n)
    row = _row(ctx, i, device_ns, steps_in)
    cause, words, value = _cause(ctx, excess, i)
    mine = np.flatnonzero(ctx.pr == i)
    row.update(cause=cause, reason=words, cause_ms=_ms(value),
               causes_ms={c: _ms(excess[c][i]) for c in CAUSES},
               operators=_operators(ctx, mine, top), health=_health_during(ctx, mine),
               step_list=[{"step": int(ctx.ps[k]), "event": int(ctx.steps.event[ctx.ps[k]]),
                           "start_ns": int(ctx.steps.start[ctx.ps[k]] + ctx.offset),
                           "end_ns": int(ctx.steps.end[ctx.ps[k]] + ctx.offset), "tokens": int(ctx.pt[k]),
                           "batch": int(ctx.batch[ctx.ps[k]]), "share_ms": _ms(ctx.share[k])} for k in mine])
    return row


def _operators(ctx: _Context, mine: np.ndarray, top: int) -> list[dict]:
    """The kernels (or host operators) of its steps, weighted by its share of each step."""
    s = ctx.steps
    frac = np.zeros(len(s))
    frac[ctx.ps[mine]] = ctx.share[mine] / np.maximum(s.work[ctx.ps[mine]], 1)
    events, step = _work_events(ctx)
    weights = frac[step]
    if not len(events):
        return []
    names = ctx.trace.name[events]
    totals = np.bincount(names, weights=ctx.trace.dur[events] * weights)
    order = np.argsort(-totals)[:top]
    strings = ctx.trace.strings.strings
    return [{"name": strings[k], "ms": _ms(totals[k])} for k in order if totals[k] > 0]


OPERATORS_TRACKED = 12  # operator names followed for every request (the capture's largest)


def _work_events(ctx: _Context) -> tuple[np.ndarray, np.ndarray]:
    """Every event of the steps' work and its step: the kernels, or on the host the
    operators directly under each step annotation."""
    s = ctx.steps
    if s.basis == "device":
        return s.work_event, s.work_step
    parent, _ = ctx.trace.nesting()
    step_of_event = np.full(len(ctx.trace), -1, np.int64)
    step_of_event[s.event] = np.arange(len(s))
    host = np.flatnonzero((ctx.trace.kind == Kind.HOST_OP) & (parent >= 0))
    owner = step_of_event[parent[host]]
    keep = owner >= 0
    return host[keep], owner[keep]


def _operators_of_all(ctx: _Context, top: int = 3) -> list[list[dict]]:
    """Per request, its ``top`` operators by its share of them, over the capture's largest
    OPERATORS_TRACKED: a (steps x operators) table, weighted by each request's share of
    each step and summed per request."""
    n = len(ctx.requests)
    events, step = _work_events(ctx)
    if not len(events) or not len(ctx.pr):
        return [[] for _ in range(n)]
    names, dur = ctx.trace.name[events], ctx.trace.dur[events].astype(float)
    totals = np.bincount(names, weights=dur)
    tracked = np.argsort(-totals)[:OPERATORS_TRACKED]
    tracked = tracked[totals[tracked] > 0]
    column = np.full(len(totals), -1, np.int64)
    column[tracked] = np.arange(len(tracked))
    keep = column[names] >= 0
    width = len(tracked)
    flat = step[keep] * width + column[names[keep]]
    step_ops = np.bincount(flat, weights=dur[keep], minlength=len(ctx.steps) * width).reshape(-1, width)
    frac = ctx.share / np.maximum(ctx.steps.work[ctx.ps], 1)
    order = np.argsort(ctx.pr, kind="stable")
    starts = np.searchsorted(ctx.pr[order], np.arange(n))
    per_request = np.zeros((n, len(tracked)))
    has = np.bincount(ctx.pr, minlength=n) > 0
    sums = np.add.reduceat(step_ops[ctx.ps[order]] * frac[order, None], np.minimum(starts, len(order) - 1), axis=0)
    per_request[has] = sums[has]
    best = np.argsort(-per_request, axis=1)[:, :top]
    strings = ctx.trace.strings.strings
    label = [strings[k] for k in tracked.tolist()]
    return [[{"name": label[c], "ms": _ms(per_request[i, c])} for c in best[i].tolist() if per_request[i, c] > 0]
            for i in range(n)]


def _health_during(ctx: _Context, mine: np.ndarray) -> dict:
    if ctx.health is None or not len(mine):
        return {}
    temp, clock = ctx.step_temp[ctx.ps[mine]], ctx.step_clock[ctx.ps[mine]]
    out = {}
    if not np.isnan(temp).all():
        out["max_temperature_c"] = round(float(np.nanmax(temp)), 1)
    if not np.isnan(clock).all():
        out["min_clock_share"] = round(float(np.nanmin(clock)), 3)
    return out


def report(trace: Trace, requests: Requests, steps: Steps, join: Join, health: Health | None = None,
           limits: Limits = LIMITS) -> dict:
    """The requests of a capture: percentiles of latency, the worst ten with their reasons,
    the join's mode and confidence, and a row per request."""
    if health is None:
        health = Health.from_trace(trace, join.clock_offset_ns)
    with _no_gc():
        return _report(_Context(trace, requests, steps, join, health, limits))


def _report(ctx: _Context) -> dict:
    requests, steps, join, limits = ctx.requests, ctx.steps, ctx.join, ctx.limits
    n = len(requests)
    excess = _excess(ctx)
    device_ns = np.bincount(ctx.pr, weights=ctx.share, minlength=n)
    steps_in = np.bincount(ctx.pr, minlength=n)
    ok = np.flatnonzero(~requests.error)
    lat = requests.latency[ok]
    worst = ok[np.argsort(-lat, kind="stable")[: limits.worst]]
    causes = _causes(ctx, excess)
    step_sums = np.bincount(join.pair_step, weights=join.pair_share, minlength=len(steps))
    return {
        "requests": n,
        "errors": int(requests.error.sum()),
        "steps": len(steps),
        "join": {"mode": join.mode, "confidence": join.confidence, "basis": steps.basis,
                 "pairs": len(join.pair_step), "unknown_request_ids": join.unknown_ids,
                 "clock_offset_ns": join.clock_offset_ns, "note": join.note,
                 "max_share_error_ns": float(np.abs(step_sums - steps.work).max()) if len(steps) else 0.0,
                 "grammars": steps.grammars(), "grammar_table": grammar_table_version(),
                 "step_notes": steps.notes[:5], "check": join.check, "phases": requests.phase_sources(),
                 "why": join_words(join)},
        "latency_ms": {f"p{q}": _ms(np.percentile(lat, q)) for q in (50, 90, 99)} if len(lat) else {},
        "worst": [request_detail(ctx, int(i), top=5, excess=excess) for i in worst],
        "rows": [_row(ctx, i, device_ns, steps_in) | {"cause": cause, "operators": ops}
                 for i, (cause, ops) in enumerate(zip(causes.tolist(), _operators_of_all(ctx), strict=True))],
        "limits": asdict(limits),
    }


def join_words(join: Join) -> str:
    """How the join was made and why its confidence is what it is, in words."""
    if join.mode == "ids":
        return "the steps name their requests"
    check = join.check or {}
    words = "by time and phase: a step's batch is the requests in the phase it runs while it runs"
    checked = check.get("steps_checked", 0)
    if not checked:
        return words + "; the steps' names give no counts to check it by"
    if not check.get("mismatches"):
        return words + f"; the counts the steps' names give confirm the batch of all {checked:,} checked"
    return words + (f"; {check['mismatches']:,} of {checked:,} steps' counts differ from the batch found "
                    f"(e.g. {check['examples'][0]['says']})")


def context(trace, requests, steps, join, health=None, limits: Limits = LIMITS) -> _Context:
    if health is None:
        health = Health.from_trace(trace, join.clock_offset_ns)
    return _Context(trace, requests, steps, join, health, limits)


def analyse_requests(trace: Trace, spans, *, mode: str = "auto", health: Health | None = None,
                     limits: Limits = LIMITS, grammars=None) -> dict:
    """Spans (SpanRow list) and a trace in, the report out: the one call the CLI, the
    Django layer and the benchmarks make (``grammars``: the step grammars to read the
    trace by, the table's by default)."""
    from traces.atrace.analysis.requests.joining import find_steps, join, requests_from_spans

    requests = requests_from_spans(spans)
    steps = find_steps(trace, grammars)
    joined = join(trace, requests, steps, mode=mode)
    return report(trace, requests, steps, joined, health, limits)
