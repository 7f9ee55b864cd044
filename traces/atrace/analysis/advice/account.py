"""Where the time goes: an account of the analysed windows that adds up to their time, so
that a verdict never stands without its reason.

Each window's time (from its start, or from when the device finished earlier work, to the end
of its device work; a window without device work: its span) is cut by what happens at each
moment, the first that holds in this order: the device computes (kernels), copies or fills,
communicates; else, on the threads that drive the device (every host thread in a trace
without device work), the host waits for the device, loads input, runs collectives on the
host, runtime calls, operators, Python code, annotated ranges; else nothing is recorded.
The parts are disjoint, so their shares add up to the windows' time. Beside them: the top
host operators by self time (with their input shapes when recorded) and the top kernels.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from ...model.stats import merge_intervals, us
from ...model.trace import Kind
from .context import Context, Window
from .waits import host_waits
from .words import duration, plural, share

#: Host code that runs a collective on the CPU, or waits for one (gloo, c10d).
HOST_COLLECTIVE = re.compile(r"^(gloo|nccl|rccl|c10d|mpi):|c10d::|ProcessGroup|::wait$|barrier", re.IGNORECASE)
DEVICE_PARTS = (("kernels", "the device computes (kernels)"), ("copies", "the device copies or fills memory"),
                ("communication", "the device communicates, with nothing computing"))
HOST_PARTS = (("host_wait", "the host waits for the device"),
              ("host_collective", "the host runs or waits for collectives"),
              ("runtime", "the host is in runtime calls (launches, allocations)"), ("input", "the host loads input"),
              ("operators", "the host runs operators"), ("python", "the host runs Python code"),
              ("annotated", "the host is in annotated ranges with no operator recorded (Python or framework code)"))
IDLE = ("nothing", "nothing is recorded on the host")


def account(ctx: Context) -> dict[str, Any]:
    """The account of the analysed windows (see the module's notes). Windows whose device
    work overlaps (a host ahead of the device) are counted once: the time accounted for is
    the union of the windows' times."""
    has_device = any(len(w.dev) for w in ctx.windows)
    labels = dict(DEVICE_PARTS + HOST_PARTS + (IDLE,))
    spans = [(max(w.start, w.device_from), w.device_end) if has_device else _host_span(ctx, w) for w in ctx.windows]
    ts, te = merge_intervals(np.array([a for a, _ in spans], np.int64), np.array([b for _, b in spans], np.int64))
    time = _measure(ts, te)
    layers: dict[str, list] = {k: [] for k in labels}
    for w in ctx.windows:
        for key, (s, e) in _layers(ctx, w, has_device):
            layers[key].append((s, e))
    totals = dict.fromkeys(labels, 0)
    us_s, us_e, covered = np.zeros(0, np.int64), np.zeros(0, np.int64), 0
    for key, pieces in layers.items():
        if not pieces:
            continue
        us_s, us_e = merge_intervals(np.concatenate([us_s, *(p[0] for p in pieces)]),
                                     np.concatenate([us_e, *(p[1] for p in pieces)]))
        both = merge_intervals(np.concatenate([us_s, ts]), np.concatenate([us_e, te]))
        now = _measure(us_s, us_e) + time - _measure(*both)  # |union of layers so far, within the windows|
        totals[key] += now - covered
        covered = now
    totals["nothing"] = time - covered
    parts = [{"part": k, "what": labels[k], "time_us": us(v), "share": round(v / time, 4) if time else 0.0}
             for k, v in totals.items() if v > 0]
    parts.sort(key=lambda p: -p["time_us"])
    host = _host_operators(ctx, has_device)
    kernels = _top_kernels(ctx) if has_device else []
    return {"time_us": us(time), "device": has_device, "parts": parts, "host_operators": host, "kernels": kernels,
            "lines": _lines(ctx, time, parts, host, kernels)}


def _measure(s: np.ndarray, e: np.ndarray) -> int:
    return int((e - s).sum())


def _layers(ctx: Context, w: Window, has_device: bool):
    t = ctx.trace
    if has_device:
        for key, kinds in (("kernels", (Kind.KERNEL,)), ("copies", (Kind.MEMCPY, Kind.MEMSET)),
                           ("communication", (Kind.COMM,))):
            d = w.dev[np.isin(t.kind[w.dev], kinds)]
            yield key, (t.ts[d], t.end[d])
    ev = host_events(ctx, w, has_device)
    waits, _ = host_waits(ctx, w)
    yield "host_wait", (t.ts[waits], t.end[waits])
    coll = _collective_names(ctx)[t.name[ev]]
    yield "host_collective", (t.ts[ev[coll]], t.end[ev[coll]])
    rt = ev[t.kind[ev] == Kind.RUNTIME]
    yield "runtime", (t.ts[rt], t.end[rt])
    yield "input", ctx.input_intervals(w) if has_device else _input_anywhere(ctx, ev)
    for key, kind in (("operators", Kind.HOST_OP), ("python", Kind.PYTHON), ("annotated", Kind.ANNOTATION)):
        k = ev[t.kind[ev] == kind]
        yield key, (t.ts[k], t.end[k])


def _host_span(ctx: Context, w: Window) -> tuple[int, int]:
    """A window without device work: its step, or the span of every host slice when the
    window is the whole trace."""
    if ctx.has_steps or len(ctx.windows) > 1:  # steps, or parts of a large trace
        return w.start, w.end
    order = _by_start(ctx)
    t = ctx.trace
    return (int(t.ts[order[0]]), int(t.end[order].max())) if len(order) else (w.start, w.end)


def _input_anywhere(ctx: Context, ev: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    t = ctx.trace
    k = np.intersect1d(ev, ctx.input_events())
    return t.ts[k], t.end[k]


def host_events(ctx: Context, w: Window, has_device: bool) -> np.ndarray:
    """Host slices in the window: on its driving threads, or on every host thread without a device."""
    t = ctx.trace
    key = ("host-events", w.start, w.end)
    got = ctx.cache.get(key)
    if got is None:
        a, b = (w.start, max(w.end, w.device_end)) if has_device or ctx.has_steps else _host_span(ctx, w)
        order = _by_start(ctx)
        lo, hi = np.searchsorted(ctx.trace.ts[order], [a - _longest(ctx), b])
        cand = order[lo:hi]
        cand = cand[(t.end[cand] > a) & (t.ts[cand] < b)]
        if has_device:
            cand = cand[np.isin(t.track[cand], w.drivers)]
        steps = np.isin(t.name[cand], _step_ids(ctx))
        profiler = t.cat[cand] == t.strings.lookup("Trace")  # the profiler's own span of the recording
        got = ctx.cache[key] = np.sort(cand[~steps & ~profiler])
    return got


def _by_start(ctx: Context) -> np.ndarray:
    got = ctx.cache.get("host-by-start")
    if got is None:
        t = ctx.trace
        host = np.flatnonzero(~t.on_device & t.is_slice)
        got = ctx.cache["host-by-start"] = host[np.argsort(t.ts[host], kind="stable")]
        ctx.cache["host-longest"] = int(t.dur[host].max()) if len(host) else 0
    return got


def _longest(ctx: Context) -> int:
    _by_start(ctx)
    return ctx.cache["host-longest"]


def _step_ids(ctx: Context) -> np.ndarray:
    names = ctx.trace.strings.strings
    return np.array([i for i, s in enumerate(names) if re.match(r"^(ProfilerStep#|step#)\d+$", s)], np.int64)


def _collective_names(ctx: Context) -> np.ndarray:
    got = ctx.cache.get("host-collective-names")
    if got is None:
        names = ctx.trace.strings.strings
        got = ctx.cache["host-collective-names"] = np.array(
            [bool(HOST_COLLECTIVE.search(s)) for s in names] + [False], bool)
    return got


def _host_operators(ctx: Context, has_device: bool, top: int = 5) -> list[dict[str, Any]]:
    """The host operators (and collectives on the host) of the windows by self time, with the
    input shapes of their longest call when recorded."""
    t = ctx.trace
    ev = np.unique(np.concatenate([host_events(ctx, w, has_device) for w in ctx.windows] or [np.zeros(0, np.int64)]))
    ev = ev[np.isin(t.kind[ev], (Kind.HOST_OP, Kind.RUNTIME))
            | ((t.kind[ev] == Kind.ANNOTATION) & _collective_names(ctx)[t.name[ev]])]
    # Self time: less the operators and runtime calls inside (from the windows' nesting where
    # the trace has a device; the host threads' slices nest in a plain pass otherwise).
    own = _model_self_times(ctx, ev) if has_device else _self_times(t, ev)
    keep = t.kind[ev] != Kind.RUNTIME
    ev, own = ev[keep], own[keep]
    if not len(ev):
        return []
    names, inv = np.unique(t.name[ev], return_inverse=True)
    total = np.bincount(inv, weights=own.astype(np.float64))
    count = np.bincount(inv)
    rows = []
    for j in np.argsort(-total, kind="stable")[:top].tolist():
        mine = ev[inv == j]
        longest = int(mine[np.argmax(t.dur[mine])])
        shapes = t.args.get(longest).get("Input Dims")
        rows.append({"op": t.strings[int(names[j])], "count": int(count[j]), "self_us": us(total[j]),
                     "share_of_self_time": round(float(total[j] / max(total.sum(), 1)), 4),
                     "threads": int(len(np.unique(t.track[mine]))), "shapes": shapes, "event": longest})
    return rows


def _model_self_times(ctx: Context, ev: np.ndarray) -> np.ndarray:
    """Per event of ``ev``: its duration less its direct children's (clipped) in the nesting of
    the window's path model (operators and runtime calls); an event no window selected keeps
    its duration."""
    t = ctx.trace
    own = t.dur[ev].astype(np.int64)
    for w in ctx.windows:
        m = w.model
        parent = m.parents()
        child = np.flatnonzero(parent >= 0)
        p = parent[child]
        clipped = np.maximum(np.minimum(t.end[m.sel[child]], t.end[m.sel[p]]) - t.ts[m.sel[child]], 0)
        inner = np.bincount(p, weights=clipped, minlength=len(m.sel)).astype(np.int64)
        k = np.searchsorted(m.sel, ev)
        hit = k < len(m.sel)
        hit[hit] &= m.sel[k[hit]] == ev[hit]
        own[hit] = np.maximum(t.dur[ev[hit]] - inner[k[hit]], 0)
    return own


def _self_times(t, ev: np.ndarray) -> np.ndarray:
    """Per event of ``ev`` (sorted): its duration less that of the events of ``ev`` directly
    inside it on its thread."""
    order = np.lexsort((-t.dur[ev], t.ts[ev], t.track[ev]))
    e = ev[order]
    parent = np.full(len(e), -1, np.int64)
    stack: list[int] = []
    ts, end, track = t.ts[e].tolist(), t.end[e].tolist(), t.track[e].tolist()
    for i in range(len(e)):
        while stack and (track[stack[-1]] != track[i] or end[stack[-1]] <= ts[i]):
            stack.pop()
        parent[i] = stack[-1] if stack else -1
        stack.append(i)
    inside = np.flatnonzero(parent >= 0)
    child = np.bincount(parent[inside], weights=np.minimum(t.end[e[inside]], t.end[e[parent[inside]]])
                        - t.ts[e[inside]], minlength=len(e))
    own = np.maximum(t.dur[e] - child.astype(np.int64), 0)
    out = np.empty(len(e), np.int64)
    out[order] = own
    return out


def _top_kernels(ctx: Context, top: int = 5) -> list[dict[str, Any]]:
    t = ctx.trace
    ks = np.concatenate([w.dev[t.kind[w.dev] == Kind.KERNEL] for w in ctx.windows])
    if not len(ks):
        return []
    names, inv = np.unique(t.name[ks], return_inverse=True)
    total = np.bincount(inv, weights=t.dur[ks].astype(np.float64))
    return [{"kernel": t.strings[int(names[j])], "count": int((inv == j).sum()), "time_us": us(total[j]),
             "share_of_kernel_time": round(float(total[j] / total.sum()), 4)}
            for j in np.argsort(-total, kind="stable")[:top].tolist()]


def _lines(ctx: Context, time: int, parts: list[dict], host: list[dict], kernels: list[dict]) -> list[str]:
    scope = f"{len(ctx.windows)} step{'s' if len(ctx.windows) > 1 else ''}" if ctx.has_steps else "the trace"
    split = "; ".join(f"{p['what']} {share(p['share'])} ({duration(p['time_us'] * 1000)})" for p in parts)
    out = [f"Where the time goes, over {scope} ({duration(time)}): {split}."]
    if host:
        out.append("Top host operators by self time: " + ", ".join(
            f"{r['op']} {duration(r['self_us'] * 1000)} ({plural(r['count'], 'call')}"
            + (f", shapes {_shapes(r['shapes'])}" if r["shapes"] else "") + ")" for r in host[:3]) + ".")
    if kernels:
        out.append("Top kernels: " + ", ".join(f"{_short(k['kernel'])} {duration(k['time_us'] * 1000)} "
                                                f"({share(k['share_of_kernel_time'])})" for k in kernels[:3]) + ".")
    return out


def _shapes(shapes: Any) -> str:
    text = str(shapes).replace(" ", "")
    return text if len(text) <= 60 else text[:59] + "…"


def _short(name: str, width: int = 50) -> str:
    return name if len(name) <= width else name[: width - 1] + "…"
