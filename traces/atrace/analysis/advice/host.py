"""Rules about the host: launch-bound steps (1), synchronisation inside a step (2) and graph
replays the host cannot keep fed (8)."""

from __future__ import annotations

import numpy as np

from ...model.stats import covered, us
from ...model.trace import FLAG_SYNC, Kind
from .common import Hit, make_finding, op_rows, pct, per_step
from .context import Context, Window
from .findings import Finding
from .inputs import stall_intervals

_ITEM_OPS = ("aten::item", "aten::_local_scalar_dense", "aten::is_nonzero", "aten::nonzero",
             "aten::equal", "aten::tolist", "aten::masked_select")


def _host_free(ctx: Context, w: Window) -> tuple[Hit, str, dict] | None:
    """The saving if the host dispatched the window's device work in no time: every
    operator, runtime call and framework time of its driving threads weighs nothing (but
    the input stall, rule 4's). Launch queueing stays: it is the device's latency, or
    work waiting behind earlier work."""
    t = ctx.trace
    launched = w.dev[ctx.launcher[w.dev] >= 0]
    stalls = stall_intervals(ctx, w)
    # How busy the device is outside the input stall (that is rule 4's).
    busy = w.busy_ns / max(w.elapsed_ns - int((stalls[1] - stalls[0]).sum()), 1)
    if not len(launched) or busy >= ctx.limits.launch_bound_device_busy_below:
        return None
    graph = ctx.is_graph_launch[ctx.launcher[launched]]
    mode = "graph" if graph.sum() > (~graph).sum() else "eager"
    host = w.host[np.isin(t.track[w.host], w.drivers)]
    if len(stalls[0]):
        host = host[~covered(stalls[0], stalls[1], t.ts[host])]
    model = w.model
    saving = model.saving(work=host, pieces=model.context_pieces(outside=stalls))
    eager = launched[~graph]
    first = eager[np.argsort(t.ts[eager], kind="stable")[:25]] if mode == "eager" else \
        launched[graph][np.argsort(t.ts[launched[graph]], kind="stable")[:25]]
    events = np.unique(np.concatenate([ctx.launcher[first], first]))
    local = model.local(host)
    roots = model.roots()[local]
    dispatch = np.isin(roots, model.roots()[model.local(ctx.launcher[launched])])
    on_path = model.on_path_ns[local]
    info = {"busy": busy, "launched": launched, "eager": eager, "graph": launched[graph], "roots": model.sel[roots],
            "root_weight": on_path, "dispatch_ns": int(on_path[dispatch].sum()) + model.context_on_path_ns,
            "cpu_ns": int(on_path[~dispatch].sum()), "cpu_roots": model.sel[roots[~dispatch]],
            "cpu_weight": on_path[~dispatch]}
    return Hit(w, saving, events, [(w.start, w.device_end)]), mode, info


def host_bound_rules(ctx: Context) -> list[Finding]:
    """Rule 1 (launch-bound) and rule 8 (graph replays): the same what-if — the host
    dispatching in no time — reported as rule 1 where most device work is launched one by
    one and as rule 8 where most of it is replayed from CUDA/HIP graphs."""
    found = {"eager": [], "graph": []}
    for w in ctx.windows:
        got = _host_free(ctx, w)
        if got is not None:
            found[got[1]].append((got[0], got[2]))
    out = []
    for mode, rows in found.items():
        finding = _host_finding(ctx, mode, rows) if rows else None
        if finding is not None:
            out.append(finding)
    return out


def _host_finding(ctx: Context, mode: str, rows: list) -> Finding | None:
    t = ctx.trace
    hits = [h for h, _ in rows]
    n = len(hits)

    def cat(key):
        return np.concatenate([info[key] for _, info in rows])

    eager, graph = cat("eager"), cat("graph")
    dispatch_ns = sum(info["dispatch_ns"] for _, info in rows)
    cpu_ns = sum(info["cpu_ns"] for _, info in rows)
    busy = float(np.mean([info["busy"] for _, info in rows]))
    kernels = eager[t.kind[eager] == Kind.KERNEL]
    calls = ctx.launcher[kernels]
    shorter = float((t.dur[kernels] < _launch_interval(t, calls)).mean()) if len(kernels) else 0.0
    models = [h.window.model for h in hits]
    path = max(sum(m.length_ns for m in models), 1)
    launched = len(eager) if mode == "eager" else len(np.unique(ctx.launcher[graph]))
    measured = {
        "device_busy_share": round(busy, 4),
        "kernels_per_step": round(len(eager) / n, 1),
        "graph_replayed_per_step": round(len(graph) / n, 1),
        "graph_launches_per_step": round(len(np.unique(ctx.launcher[graph])) / n, 1),
        "median_kernel_us": us(np.median(t.dur[kernels])) if len(kernels) else None,
        "median_launch_call_us": us(np.median(t.dur[calls])) if len(calls) else None,
        "kernels_shorter_than_launch_share": round(shorter, 4),  # than the host's time per launch
        "host_per_launch_us": us(dispatch_ns / max(launched, 1)),
        "dispatch_share_of_path": round(dispatch_ns / path, 4),
        "cpu_work_share_of_path": round(cpu_ns / path, 4),
        "framework_time_share_of_path": round(sum(m.context_on_path_ns for m in models) / path, 4),
        "windows": n,
    }
    cpu = cpu_ns > dispatch_ns
    ops = op_rows(t, *_unique_roots(cat("cpu_roots" if cpu else "roots"), cat("cpu_weight" if cpu else "root_weight")))
    top = ops[0]["op"] if ops else "host code"
    slow_host = measured["host_per_launch_us"] > ctx.limits.launch_bound_host_per_launch_us
    if mode == "graph":
        title = (f"The device is idle {pct(1 - busy)} {ctx.of_each} between CUDA/HIP graph replays "
                 f"({measured['graph_launches_per_step']:.0f} per step) while the host works, mostly in {top}")
        action = ("Keep the host ahead of the graph replays: move the host work between replays off the "
                  "path (asynchronous scheduling, prepare the next inputs while the device runs), capture it "
                  "in the graph too, and read no device value between replays.")
    elif cpu or slow_host:
        title = (f"Host-bound: the device is idle {pct(1 - busy)} {ctx.of_each} while the host runs "
                 + (f"CPU work, mostly {top}" if cpu else
                    f"{measured['host_per_launch_us']:,.0f} µs of host code per kernel it launches, mostly in {top}"))
        action = ("Move the CPU work out of the step: do it once before the loop, in the data loader's workers or a "
                  "background thread, or on the device (create tensors there: torch.rand(..., device='cuda')); "
                  "profile the host code of the top operators.")
    else:
        title = (f"Launch-bound: the device is idle {pct(1 - busy)} {ctx.of_each} while the host launches "
                 f"{len(eager) / n:.0f} kernels one by one, {measured['host_per_launch_us']:,.0f} µs of host time each"
                 + (f" (median kernel {measured['median_kernel_us']:,.1f} µs)" if len(kernels) else ""))
        action = ("Launch the step once instead of kernel by kernel: capture it as a CUDA/HIP graph "
                  "(torch.compile(mode='reduce-overhead'), or torch.cuda.CUDAGraph for a decode loop); fuse "
                  "small kernels (torch.compile); give each kernel more work (a larger batch).")
    rule = "graph_replays" if mode == "graph" else "launch_bound"
    return make_finding(ctx, rule, hits, title=title, measured=measured, operators=ops, action=action)


def _launch_interval(t, calls: np.ndarray) -> np.ndarray:
    """Per launch call: the host's time from it to the next launch on its thread (what the
    host spends per launch; the call's own time for the last one)."""
    order = np.lexsort((t.ts[calls], t.track[calls]))
    c = calls[order]
    nxt = np.empty(len(c), np.int64)
    nxt[:-1] = t.ts[c[1:]] - t.ts[c[:-1]]
    same = np.zeros(len(c), bool)
    same[:-1] = t.track[c[1:]] == t.track[c[:-1]]
    gap = np.where(same, nxt, t.dur[c])
    out = np.empty(len(c), np.int64)
    out[order] = gap
    return out


def _unique_roots(roots: np.ndarray, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each root once, with the summed work of its tree on the path."""
    uniq, inv = np.unique(roots, return_inverse=True)
    return uniq, np.bincount(inv, weights=weights.astype(np.float64), minlength=len(uniq))


def sync_rule(ctx: Context) -> Finding | None:
    """Rule 2: synchronisation calls inside a step that block the host, and what the step
    would save if they did not wait: their sync edges dropped, or the device's idle time
    after each (see :func:`_idle_after`), whichever is more."""
    t = ctx.trace
    hits, syncs_all, parents_all = [], [], []
    min_ns = ctx.limits.sync_min_wait_us * 1000
    for w in ctx.windows:
        host = w.host
        syncs = host[((t.flags[host] & FLAG_SYNC) != 0) & (t.dur[host] >= min_ns)]
        if not len(syncs):
            continue
        saving = max(w.model.saving(syncs=syncs), _idle_after(ctx, w, syncs))
        m = w.model
        parent = m.parents()[m.local(syncs)]
        op = np.where(parent >= 0, m.sel[np.maximum(parent, 0)], syncs)
        op = np.where(t.kind[op] == Kind.HOST_OP, op, syncs)
        order = np.argsort(-t.dur[syncs], kind="stable")
        hits.append(Hit(w, saving, np.unique(np.concatenate([syncs[order], op[order]]))[:50],
                        [(int(t.ts[s]), int(t.end[s])) for s in syncs[order][:5].tolist()]))
        syncs_all.append(syncs)
        parents_all.append(op)
    if not hits:
        return None
    syncs, ops_of = np.concatenate(syncs_all), np.concatenate(parents_all)
    ops = op_rows(t, ops_of, t.dur[syncs].astype(np.float64))
    n = len(ctx.windows)
    wait = float(t.dur[syncs].sum())
    measured = {
        "syncs_per_step": round(len(syncs) / n, 2),
        "wait_per_step_us": per_step(ctx, wait),
        "wait_total_us": us(wait),
        "calls": sorted({t.strings[t.name[s]] for s in syncs.tolist()}),
    }
    top = ops[0]["op"] if ops else "synchronisation"
    times = "once" if len(syncs) == n else f"{len(syncs) / n:.0f} times"
    title = (f"The host waits for the device {times} {'per step' if ctx.has_steps else 'in the trace'} "
             f"({measured['wait_per_step_us']:,.0f} µs per step) in {top}")
    return make_finding(ctx, "host_sync", hits, title=title, measured=measured, operators=ops,
                        action=_sync_action([r["op"] for r in ops]))


def _idle_after(ctx: Context, w: Window, syncs: np.ndarray) -> int:
    """Per sync, the least of its wait and how long the device then idles (in the window)
    before it gets work again, summed: had the host not waited, the work it did after the
    sync could have been queued behind the device's backlog. This sees what the path
    graph cannot: work the sync delays on another thread (the autograd engine's). The
    device idles while it computes and copies nothing (a collective may run meanwhile);
    only idle time that ends in the window's own device work counts."""
    t = ctx.trace
    starts, ends = ctx.tail.work_union
    after = t.end[syncs]
    k = np.searchsorted(starts, after, "right") - 1
    busy = (k >= 0) & (after < ends[np.maximum(k, 0)])
    nxt = np.searchsorted(starts, after, "left")
    resume = np.where(nxt < len(starts), starts[np.minimum(nxt, len(starts) - 1)], w.device_end)
    # Only a wait the window's own later device work sits behind: after a sync that ends a
    # step the device's next work is the next step's.
    later = resume < w.device_end
    idle = np.where(busy | ~later, 0, resume - after)
    return int(np.minimum(np.maximum(idle, 0), t.dur[syncs]).sum())


def _sync_action(ops: list[str]) -> str:
    if any(op in _ITEM_OPS for op in ops):
        return ("Move `.item()` (and other reads of device values: `.tolist()`, `print(tensor)`, `if tensor:`) "
                "out of the step: keep the values on the device and read them every N steps, after the step's work "
                "is queued.")
    return ("Remove the synchronisation from the step (`torch.cuda.synchronize()`, blocking copies, event "
            "waits): synchronise once every N steps where timing or logging needs it, and copy results with "
            "non_blocking=True into pinned memory.")
