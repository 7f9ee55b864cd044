"""Rule 2: the host waits for the device inside a step — every kind of wait, not only the
calls named "synchronize":

* synchronisation: device, stream and event synchronize calls (``cudaDeviceSynchronize``,
  ``cudaStreamSynchronize``, ``cudaEventSynchronize``, ``hipEventSynchronize`` …);
* event waits: ``cudaStreamWaitEvent`` / ``hipStreamWaitEvent`` that held the host;
* blocking copies: the synchronous copy calls (``cudaMemcpy``, ``cudaMemcpy2D``,
  ``hipMemcpy``, ``hipMemcpyWithStream``, ``hipMemcpyDtoH`` …), and asynchronous ones that
  did not return before their copy ended (pageable memory, a copy to the host that waits
  for the stream);
* collective waits on the host (``c10d::wait``, ``ProcessGroup…::wait``, barriers);
* scalar reads: any of those under ``aten::_local_scalar_dense`` / ``aten::item`` (a
  ``.item()``, ``.cpu()``, ``.tolist()``, ``if tensor:``) are reported as such.

Each wait is attributed to the operator and the Python frame that issued it, where the trace
records them. The saving is the path's with the synchronize calls' sync edges dropped and the
other waits taking no time, or the device's idle time during and after each wait (see
:func:`idle_after`), whichever is more, and never more than the waits themselves.
"""

from __future__ import annotations

import re

import numpy as np

from ...model.stats import covered_before, us
from ...model.trace import FLAG_SYNC, Kind
from .common import Hit, make_finding, op_rows, per_step
from .context import Context, Window
from .findings import Finding
from .words import duration, share, times

_KINDS = (
    ("synchronize", re.compile(r"synchroni[sz]e", re.IGNORECASE)),
    ("event wait", re.compile(r"StreamWaitEvent|WaitEvent|EventQuery", re.IGNORECASE)),
    ("blocking copy", re.compile(r"^(cuda|hip|cu|mtia)Memcpy(?!.*Async)", re.IGNORECASE)),
    ("collective wait", re.compile(r"^(c10d::|_c10d_functional::|c10d_functional::)?wait(_tensor)?$|"
                                   r"ProcessGroup\w*::wait|Work::wait|::barrier$|^barrier$", re.IGNORECASE)),
)
KIND_NAMES = tuple(k for k, _ in _KINDS) + ("scalar read",)
SCALAR_OPS = ("aten::item", "aten::_local_scalar_dense", "aten::is_nonzero", "aten::tolist", "aten::equal")


def _name_kinds(t) -> np.ndarray:
    """Per string id: the wait kind its name says (index in _KINDS, -1: none)."""
    out = np.full(len(t.strings.strings) + 1, -1, np.int8)
    for i, s in enumerate(t.strings.strings):
        for k, (_, pattern) in enumerate(_KINDS):
            if pattern.search(s):
                out[i] = k
                break
    return out


def host_waits(ctx: Context, w: Window) -> tuple[np.ndarray, np.ndarray]:
    """The window's host waits of at least ``sync_min_wait_us``: (events, kind index into
    KIND_NAMES), cached."""
    key = ("waits", w.start, w.end)
    got = ctx.cache.get(key)
    if got is not None:
        return got
    t = ctx.trace
    names = ctx.cache.get("wait-names")
    if names is None:
        names = ctx.cache["wait-names"] = _name_kinds(t)
    host = w.host
    kind = names[t.name[host]].astype(np.int64)
    kind[(t.flags[host] & FLAG_SYNC) != 0] = 0
    runtime = t.kind[host] == Kind.RUNTIME
    kind[(kind < 3) & ~runtime] = -1  # waits on the runtime's calls,
    kind[(kind == 3) & (t.kind[host] != Kind.HOST_OP)] = -1  # collective waits as operators
    # Asynchronous copy calls that returned only after their copy ended.
    copies = w.dev[(t.kind[w.dev] == Kind.MEMCPY) & (ctx.launcher[w.dev] >= 0)]
    calls = ctx.launcher[copies]
    waited = calls[(t.end[calls] >= t.end[copies]) & (t.ts[copies] > t.ts[calls])]
    k = np.searchsorted(host, waited)
    ok = (k < len(host))
    ok[ok] &= host[k[ok]] == waited[ok]
    kind[k[ok]] = np.where(kind[k[ok]] < 0, 2, kind[k[ok]])
    keep = (kind >= 0) & (t.dur[host] >= ctx.limits.sync_min_wait_us * 1000)
    ev, kind = host[keep], kind[keep]
    frames = issuers(ctx, w, ev)
    scalar = np.array([any(n in SCALAR_OPS for n in chain) for chain in frames["chains"]], bool)
    kind[scalar] = len(_KINDS)
    got = ctx.cache[key] = (ev, kind)
    ctx.cache[("issuers", w.start, w.end)] = frames
    return got


def issuers(ctx: Context, w: Window, events: np.ndarray) -> dict:
    """Per event: the nearest enclosing operator and Python frame (event ids, -1: none),
    and the names of its enclosing operators."""
    t, m = ctx.trace, w.model
    parents = m.parents()
    op = np.full(len(events), -1, np.int64)
    py = python_frames(ctx, events)
    chains: list[list[str]] = [[] for _ in events]
    cur = parents[m.local(events)] if len(events) else np.zeros(0, np.int64)
    for _ in range(64):
        live = cur >= 0
        if not live.any():
            break
        ev = np.where(live, m.sel[np.maximum(cur, 0)], -1)
        kinds = np.where(live, t.kind[np.maximum(ev, 0)], -1)
        is_op = live & (kinds == Kind.HOST_OP)
        op = np.where((op < 0) & is_op, ev, op)
        for j in np.flatnonzero(is_op).tolist():
            chains[j].append(t.strings[t.name[ev[j]]])
        cur = np.where(live, parents[np.maximum(cur, 0)], -1)
    return {"op": op, "python": py, "chains": chains}


def python_frames(ctx: Context, events: np.ndarray, most: int = 50) -> np.ndarray:
    """Per event (the first ``most``): the innermost Python frame on its thread that encloses
    it (-1: none recorded)."""
    t = ctx.trace
    out = np.full(len(events), -1, np.int64)
    frames = ctx.cache.get("python")
    if frames is None:
        frames = ctx.cache["python"] = np.flatnonzero((t.kind == Kind.PYTHON) & t.is_slice)
    if not len(frames):
        return out
    for j, e in enumerate(events[:most].tolist()):
        mine = frames[(t.track[frames] == t.track[e]) & (t.ts[frames] <= t.ts[e]) & (t.end[frames] >= t.end[e])]
        if len(mine):
            out[j] = int(mine[np.argmax(t.ts[mine])])
    return out


def host_wait_rule(ctx: Context) -> Finding | None:
    t = ctx.trace
    hits, waits_all, kinds_all, ops_all, py_all = [], [], [], [], []
    for w in ctx.windows:
        ev, kind = host_waits(ctx, w)
        if not len(ev):
            continue
        frames = ctx.cache[("issuers", w.start, w.end)]
        hits.append(Hit(w, _saving(ctx, w, ev, kind), *_evidence(t, ev, frames["op"])))
        waits_all.append(ev)
        kinds_all.append(kind)
        ops_all.append(np.where(frames["op"] >= 0, frames["op"], ev))
        py_all.append(frames["python"])
    if not hits:
        return None
    ev, kind, ops_of, py = (np.concatenate(x) for x in (waits_all, kinds_all, ops_all, py_all))
    wait = t.dur[ev].astype(np.float64)
    n = len(ctx.windows)
    elapsed = sum(w.elapsed_ns for w in ctx.windows)
    by_kind = _by_kind(t, ev, kind, ops_of, py, wait)
    measured = {
        "waits_per_step": round(len(ev) / n, 2),
        "wait_per_step_us": per_step(ctx, wait.sum()),
        "wait_total_us": us(wait.sum()),
        "share_of_step_time": round(float(wait.sum()) / max(elapsed, 1), 4),
        "calls": sorted({t.strings[t.name[e]] for e in ev.tolist()}),
        "by_kind": by_kind,
    }
    top = by_kind[0]
    where = f" in {top['operator']}" if top["operator"] else ""
    frame = f" ({top['python_frame']})" if top["python_frame"] else ""
    per = "per step" if ctx.has_steps else "in the trace"
    title = (f"The host waits for the device {times(len(ev) / n, per)}, {duration(wait.sum() / n)} "
             f"{'per step' if ctx.has_steps else 'in all'} ({share(wait.sum() / max(elapsed, 1))} of the time); "
             f"most in {_kind_phrase(top)}{where}{frame}")
    ops = op_rows(t, ops_of, wait)
    return make_finding(ctx, "host_sync", hits, title=title, measured=measured, operators=ops,
                        action=_action({r["kind"] for r in by_kind}))


def _saving(ctx: Context, w: Window, ev: np.ndarray, kind: np.ndarray) -> int:
    t = ctx.trace
    flagged = ev[(t.flags[ev] & FLAG_SYNC) != 0]
    other = ev[(t.flags[ev] & FLAG_SYNC) == 0]
    # A blocking copy's own copy starts late because the call held it (staging pageable memory,
    # waiting for the stream): its launch queueing goes with the wait.
    own = w.dev[np.isin(ctx.launcher[w.dev], ev)]
    what = w.model.saving(syncs=flagged if len(flagged) else None, work=other if len(other) else None,
                          launches=own if len(own) else None)
    return min(max(what, idle_after(ctx, w, ev)), int(t.dur[ev].sum()))


def _evidence(t, ev: np.ndarray, ops: np.ndarray) -> tuple[np.ndarray, list[tuple[int, int]]]:
    order = np.argsort(-t.dur[ev], kind="stable")
    shown = np.concatenate([ev[order], ops[order][ops[order] >= 0]])
    _, first = np.unique(shown, return_index=True)
    events = shown[np.sort(first)][:50]
    return events, [(int(t.ts[s]), int(t.end[s])) for s in ev[order][:5].tolist()]


def _by_kind(t, ev, kind, ops_of, py, wait) -> list[dict]:
    rows = []
    for k in np.unique(kind).tolist():
        m = kind == k
        j = np.flatnonzero(m)[np.argmax(wait[m])]
        op = int(ops_of[j])
        rows.append({
            "kind": KIND_NAMES[k], "count": int(m.sum()), "wait_us": us(wait[m].sum()),
            "calls": sorted({t.strings[t.name[e]] for e in ev[m].tolist()}),
            "operator": t.strings[t.name[op]] if t.kind[op] == Kind.HOST_OP else "",
            "python_frame": t.strings[t.name[py[j]]] if py[j] >= 0 else "",
            "worst_event": int(ev[j]),
        })
    rows.sort(key=lambda r: -r["wait_us"])
    return rows


def _kind_phrase(row: dict) -> str:
    calls = ", ".join(row["calls"][:2])
    label = {"blocking copy": "blocking copies", "synchronize": "synchronize calls", "event wait": "event waits",
             "collective wait": "collective waits", "scalar read": "scalar reads (.item() and the like)"}[row["kind"]]
    return f"{label} ({calls}, {duration(row['wait_us'] * 1000)})"


def _action(kinds: set[str]) -> str:
    parts = []
    if "scalar read" in kinds:
        parts.append("Move `.item()`, `.cpu()`, `.tolist()`, `print(tensor)` and `if tensor:` out of the step: keep "
                     "the values on the device and read them every N steps, after the step's work is queued.")
    if "blocking copy" in kinds:
        parts.append("Make the copies asynchronous: pin the host memory (pin_memory=True, tensor.pin_memory()) and "
                     "copy with non_blocking=True, reading the result only when it is needed.")
    if "collective wait" in kinds:
        parts.append("Wait for collectives only where their result is used (async_op=True, then work.wait() late).")
    if kinds & {"synchronize", "event wait"} or not parts:
        parts.append("Remove the synchronisation from the step (`torch.cuda.synchronize()`, event waits): "
                     "synchronise once every N steps where timing or logging needs it.")
    return " ".join(parts)


def idle_after(ctx: Context, w: Window, waits: np.ndarray) -> int:
    """Per wait, how long the device idled while the host waited and then until it got work
    again (in the window), at most the wait's duration, summed: had the host not waited, the
    work it did after the wait could have been queued behind the device's backlog, or have
    kept an idle device busy. This sees what the path graph cannot: work the wait delays on
    another thread (the autograd engine's), a wait on something the trace does not show (a
    blocking copy that held the host half a second while the device had nothing to do). The
    device idles while it computes and copies nothing (a collective may run meanwhile); only
    idle time followed by the window's own device work counts."""
    t = ctx.trace
    starts, ends = ctx.tail.work_union
    if not len(starts):  # no device work: nothing idles behind the waits
        return 0
    before, after = t.ts[waits], t.end[waits]
    nxt = np.searchsorted(starts, after, "left")
    resume = np.where(nxt < len(starts), starts[np.minimum(nxt, len(starts) - 1)], w.device_end)
    k = np.searchsorted(starts, after, "right") - 1
    busy = (k >= 0) & (after < ends[np.maximum(k, 0)])
    later = resume < w.device_end
    idle = np.where(busy | ~later, 0, resume - after)
    during = (after - before) - (covered_before(starts, ends, after) - covered_before(starts, ends, before))
    during = np.where(later | busy, during, 0)  # the device works again after the wait
    return int(np.minimum(np.maximum(idle, 0) + np.maximum(during, 0), t.dur[waits]).sum())


