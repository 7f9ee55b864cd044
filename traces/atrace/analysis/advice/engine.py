"""Rules for inference engines, recognised from the events (see :mod:`.inference`): never
from file names or one engine's code.

* ``replay_gaps``: decode steps replayed from CUDA/HIP graphs (``cudaGraphLaunch``,
  ``hipGraphLaunch``) leave the device idle between replays while the host schedules the
  next one: the next replay's launch call began after the previous replay ended. The
  saving is the device's idle time in those gaps (outside other device work and the host's
  waits, which are rule 2's): with the launch queued in time, the replay would have started
  at once. The replays are read over the whole analysed time, not step by step (a decode
  step's replay often runs while the host already schedules the next step); a gap counts in
  the step where it begins. Rule 8 bounds the same fix: :func:`one_replay_finding` keeps one.
* ``prefill_stall``: a prefill batched into a step with decodes holds them up: the path's
  saving with the prefill's work (operators and ranges named prefill, the device work they
  launch, kernels named prefill) taking no time, in the steps that decode too (in a trace
  without steps: where a prefill range overlaps a decode range). Steps with device work only:
  a CPU-only trace is rule 9's.
* ``kv_cache``: KV-cache writes and block copies (``reshape_and_cache``, ``copy_blocks``,
  ``swap_blocks`` …): the path's saving with them taking no time.
"""

from __future__ import annotations

import re

import numpy as np

from ...model.stats import covered_before, merge_intervals, us
from ...model.trace import Kind
from .common import Hit, make_finding, op_rows, pct, spans_of
from .context import Context, Window, device_work
from .findings import Finding
from .inference import _KV, BACK_TO_BACK_NS
from .waits import host_waits
from .words import duration, duration_us, plural

# The word, not a longer one ("decoder" layers are not decode steps).
_PREFILL = re.compile(r"(?<![a-z])prefill(?![a-z])", re.IGNORECASE)
_DECODE = re.compile(r"(?<![a-z])decode(?![a-z])", re.IGNORECASE)
RULE8_OVER_GAPS = 1.5


def engine_rules(ctx: Context) -> list[Finding]:
    return [f for f in (replay_gap_rule(ctx), prefill_rule(ctx), kv_cache_rule(ctx)) if f is not None]


# -- replay gaps ---------------------------------------------------------------------------
def _replays(ctx: Context) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every graph replay in the analysed time: (launch calls, first start, last end of
    their work), by start. Over the whole time, not window by window: a decode loop's replay
    often runs while the host already schedules the next step."""
    t = ctx.trace
    lo, hi = min(w.start for w in ctx.windows), max(w.device_end for w in ctx.windows)
    dev = np.flatnonzero((ctx.launcher >= 0) & t.on_device & (t.ts >= lo) & (t.ts < hi))
    dev = dev[ctx.is_graph_launch[ctx.launcher[dev]]]
    if not len(dev):
        return (np.zeros(0, np.int64),) * 3
    calls, inv = np.unique(ctx.launcher[dev], return_inverse=True)
    first = np.full(len(calls), np.iinfo(np.int64).max)
    last = np.zeros(len(calls), np.int64)
    np.minimum.at(first, inv, t.ts[dev])
    np.maximum.at(last, inv, t.end[dev])
    order = np.argsort(first, kind="stable")
    return calls[order], first[order], last[order]


def _minus(a: np.ndarray, b: np.ndarray, s: np.ndarray, e: np.ndarray) -> np.ndarray:
    """Per interval [a, b): its length outside the merged (sorted, disjoint) intervals [s, e)."""
    return np.maximum((b - a) - (covered_before(s, e, b) - covered_before(s, e, a)), 0)


def _late_gaps(ctx: Context, calls, first, last):
    """The gaps between consecutive replays that the host caused: the next replay's launch
    call began after the previous replay ended (the device had nothing queued). Their idle
    time outside other device work and outside the host's waits (rule 2's)."""
    t = ctx.trace
    a, b, nxt = last[:-1], first[1:], calls[1:]
    late = (b - a > BACK_TO_BACK_NS) & (t.ts[nxt] >= a)
    a, b, nxt = a[late], b[late], nxt[late]
    work = device_work(t)
    ds, de = ctx.tail.union
    waits = np.concatenate([host_waits(ctx, w)[0] for w in ctx.windows])
    waits = waits[~work[waits]] if len(waits) else waits
    ss, ee = merge_intervals(np.concatenate([ds, t.ts[waits]]), np.concatenate([de, t.end[waits]]))
    return a, b, nxt, _minus(a, b, ss, ee)


def replay_gap_rule(ctx: Context) -> Finding | None:
    t = ctx.trace
    if not ctx.windows:
        return None
    calls, first, last = _replays(ctx)
    if len(calls) < 2:
        return None
    a, b, nxt, idle = _late_gaps(ctx, calls, first, last)
    hits, host_all, gaps_all = [], [], []
    seen = np.zeros(len(calls), bool)  # replays that start in an analysed window
    for w in ctx.windows:
        seen |= (first >= w.start) & (first < w.end)
        mine = (a >= w.start) & (a < w.end)
        if not idle[mine].sum():
            continue
        gaps_all.append(idle[mine])
        host = w.host[np.isin(t.track[w.host], w.drivers) & (t.kind[w.host] == Kind.HOST_OP)]
        inside = host[_overlaps(t.ts[host], t.end[host], a[mine], b[mine])]
        hits.append(Hit(w, int(idle[mine].sum()), np.concatenate([nxt[mine][:25], inside[:25]]),
                        list(zip(a[mine].tolist(), b[mine].tolist()))))
        host_all.append(inside)
    if not hits:
        return None
    gaps = np.concatenate(gaps_all)
    gaps = gaps[gaps > 0]
    n = len(ctx.windows)
    elapsed = sum(w.end - w.start for w in ctx.windows)  # a step's replay runs into the next step
    # The host's time from each launch to the next, for the launches in the analysed windows.
    between = np.diff(t.ts[calls])[seen[:-1]] if len(calls) > 1 else np.zeros(0, np.int64)
    sched = float(np.median(between)) if len(between) else 0.0
    ops = op_rows(t, np.concatenate(host_all))
    top = ops[0]["op"] if ops else "host code"
    measured = {
        "replays": int(seen.sum()),
        "gaps": int(len(gaps)),
        "idle_between_replays_us": us(gaps.sum()),
        "idle_share_of_step": round(float(gaps.sum()) / max(elapsed, 1), 4),
        "median_gap_us": us(np.median(gaps)),
        "host_between_launches_median_us": us(sched),
        "median_replay_us": us(np.median((last - first)[seen])),
    }
    where = f" in {plural(n, 'step')}" if ctx.has_steps else ""
    title = (f"Graph replays leave the device idle {pct(measured['idle_share_of_step'])} {ctx.of_each} between "
             f"them ({plural(len(gaps), 'gap')}{where}, median "
             f"{duration(np.median(gaps))}, replays of {duration_us(measured['median_replay_us'])}): the host takes "
             f"{duration(sched)} to schedule each replay, mostly in {top}")
    action = ("Keep the next replay queued before the current one ends: schedule step N+1 while step N runs "
              "(asynchronous output processing, overlap the scheduler with the device), move sampling and "
              "input preparation into the graph or onto the device, and read no device value between replays.")
    return make_finding(ctx, "replay_gaps", hits, title=title, measured=measured, operators=ops, action=action)


def one_replay_finding(found: list[Finding | None]) -> list[Finding | None]:
    """Rule 8 (the host dispatching in no time) and the replay gaps bound the same fix, the
    host keeping ahead of the replays: one stays. Rule 8, unless its saving is more than
    ``RULE8_OVER_GAPS`` times the gaps' (its step-by-step what-if then counts host time that
    overlapped the previous step's replay, as in a decode loop whose replays run into the
    next step); the gaps miss only the host's time before the first replay."""
    both = {f.rule: f for f in found if f is not None and f.rule in ("graph_replays", "replay_gaps")}
    if len(both) < 2:
        return found
    rule8, gaps = both["graph_replays"], both["replay_gaps"]
    drop = gaps if rule8.saving_ns <= RULE8_OVER_GAPS * gaps.saving_ns else rule8
    return [f for f in found if f is not drop]


def _overlaps(s: np.ndarray, e: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    k = np.searchsorted(a, e, "left") - 1  # the last gap that starts before the event ends
    ok = k >= 0
    return ok & (b[np.maximum(k, 0)] > s)


# -- prefill batched with decodes ------------------------------------------------------------
def _named(t, pattern: re.Pattern) -> np.ndarray:
    ids = [i for i, s in enumerate(t.strings.strings) if pattern.search(s)]
    return np.isin(t.name, ids) if ids else np.zeros(len(t), bool)


def _phase_work(ctx: Context, w: Window, named: np.ndarray) -> np.ndarray:
    """The window's work of a phase: host ranges and operators so named, the runtime calls and
    operators inside them on their thread, the device work those launch, kernels so named."""
    t = ctx.trace
    ranges = _ranges(ctx, named, w)
    dev = w.dev[named[w.dev]]
    if not len(ranges):
        return dev
    host = w.host
    inside = np.zeros(len(host), bool)
    for track in np.unique(t.track[ranges]).tolist():
        rs, re_ = merge_intervals(t.ts[ranges[t.track[ranges] == track]], t.end[ranges[t.track[ranges] == track]])
        on = np.flatnonzero(t.track[host] == track)
        k = np.searchsorted(rs, t.ts[host[on]], "right") - 1
        inside[on] = (k >= 0) & (t.end[host[on]] <= re_[np.maximum(k, 0)])
    calls = host[inside]
    launched = w.dev[np.isin(ctx.launcher[w.dev], calls)]
    return np.unique(np.concatenate([calls, launched, dev]))


def _ranges(ctx: Context, named: np.ndarray, w: Window) -> np.ndarray:
    """Host ranges and operators so named that overlap the window."""
    t = ctx.trace
    ev = np.flatnonzero(named & ~t.on_device & t.is_slice)
    return ev[(t.ts[ev] < w.end) & (t.end[ev] > w.start)]


def _batched(ctx: Context, w: Window, pre: np.ndarray, dec: np.ndarray) -> bool:
    """A prefill batched with decodes: in a step that decodes too, or (a trace without steps)
    a prefill range that overlaps a decode range."""
    t = ctx.trace
    p, d = _ranges(ctx, pre, w), _ranges(ctx, dec, w)
    if ctx.has_steps:
        return bool((len(p) or pre[w.dev].any()) and (len(d) or dec[w.dev].any()))
    if not len(p) or not len(d):
        return False
    return bool(((t.ts[p][:, None] < t.end[d][None, :]) & (t.end[p][:, None] > t.ts[d][None, :])).any())


def prefill_rule(ctx: Context) -> Finding | None:
    t = ctx.trace
    pre, dec = _named(t, _PREFILL), _named(t, _DECODE)
    if not pre.any() or not dec.any():
        return None
    hits, prefill_ns, mixed = [], 0, 0
    for w in ctx.windows:
        if not len(w.dev) or not _batched(ctx, w, pre, dec):
            continue
        mine = _phase_work(ctx, w, pre)
        mixed += 1
        dev = mine[t.on_device[mine]]
        prefill_ns += int(np.sum(t.dur[dev]))
        saving = w.model.saving(work=mine)
        hits.append(Hit(w, saving, dev[np.argsort(-t.dur[dev], kind="stable")][:50], spans_of(t, dev)))
    if not hits:
        return None
    n = len(ctx.windows)
    measured = {"steps_with_prefill_and_decode": mixed, "steps": n, "prefill_device_us": us(prefill_ns)}
    ops = op_rows(t, np.concatenate([h.events for h in hits]))
    saved = sum(h.saving_ns for h in hits)
    title = (f"A prefill batched with decodes stalls them: {mixed} of {n} steps run a prefill "
             f"({duration(prefill_ns / max(mixed, 1))} of device work each) and their decodes finish "
             f"{duration(saved / max(mixed, 1))} later")
    action = ("Split long prefills into chunks that fit beside the decodes (chunked prefill with a token budget "
              "per step), or run prefills on other devices (disaggregated prefill), so decode steps keep their "
              "pace.")
    return make_finding(ctx, "prefill_stall", hits, title=title, measured=measured, operators=ops, action=action)


# -- KV-cache writes and copies --------------------------------------------------------------
def kv_cache_rule(ctx: Context) -> Finding | None:
    t = ctx.trace
    kv = _named(t, _KV)
    if not kv.any():
        return None
    hits, found, busy = [], [], 0
    for w in ctx.windows:
        mine = w.dev[kv[w.dev]]
        busy += w.busy_ns
        if not len(mine):
            continue
        found.append(mine)
        hits.append(Hit(w, w.model.saving(work=mine), mine[np.argsort(-t.dur[mine], kind="stable")][:50],
                        spans_of(t, mine)))
    if not hits:
        return None
    mine = np.concatenate(found)
    copies = int((t.kind[mine] == Kind.MEMCPY).sum())
    total = int(t.dur[mine].sum())
    n = len(ctx.windows)
    measured = {"kv_events_per_step": round(len(mine) / n, 1), "copies": copies, "kv_device_us": us(total),
                "share_of_device_time": round(total / max(busy, 1), 4)}
    ops = op_rows(t, mine)
    title = (f"KV-cache writes and copies take {pct(measured['share_of_device_time'])} of the device time "
             f"({duration(total / n)}{' per step' if ctx.has_steps else ''}, mostly {ops[0]['op']})")
    action = ("Write the KV cache inside the attention kernel (fused cache write), keep blocks in place instead "
              "of copying or swapping them (larger cache, fewer preemptions), and copy blocks in one batched call.")
    return make_finding(ctx, "kv_cache", hits, title=title, measured=measured, operators=ops, action=action)
