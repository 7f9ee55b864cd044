"""Rules about the host: launch-bound steps (1) and graph replays the host cannot keep fed (8);
its waits for the device (2) are in :mod:`.waits`."""

from __future__ import annotations

import numpy as np

from ...model.stats import covered, us
from ...model.trace import FLAG_LAUNCH, FLAG_SYNC, Kind
from .common import Hit, make_finding, op_rows, pct
from .context import Context, Window
from .findings import Finding
from .inputs import stall_intervals
from .waits import host_waits
from .words import duration, duration_us, plural, share


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
    host = host[~np.isin(host, host_waits(ctx, w)[0])]  # the waits are rule 2's
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
    host_ns = (dispatch_ns + cpu_ns) / n
    host = np.concatenate([h.window.host for h in hits])
    waits = np.concatenate([host_waits(ctx, h.window)[0] for h in hits])
    setup = _setup_call(t, host[~np.isin(host, waits)], dispatch_ns + cpu_ns)
    also = f"; {setup}" if setup else ""
    if mode == "graph":
        title = (f"The device is idle {pct(1 - busy)} {ctx.of_each} between CUDA/HIP graph replays "
                 f"({_count(measured['graph_launches_per_step'])} per step) while the host works "
                 f"{duration(host_ns)}{_per(ctx)}, mostly in {top}{also}")
        action = ("Keep the host ahead of the graph replays: move the host work between replays off the "
                  "path (asynchronous scheduling, prepare the next inputs while the device runs), capture it "
                  "in the graph too, and read no device value between replays.")
    elif cpu or slow_host:
        what = f"CPU work{_per(ctx)}, mostly {top}" if cpu else f"host code{_per(ctx)}, mostly in {top}"
        title = (f"Host-bound: the device is idle {pct(1 - busy)} {ctx.of_each} while the host runs "
                 f"{duration(host_ns)} of {what} ({plural(launched // n, 'kernel launch', 'kernel launches')}"
                 f"{' per step' if ctx.has_steps else ''}){also}")
        action = ("Move the CPU work out of the step: do it once before the loop, in the data loader's workers or a "
                  "background thread, or on the device (create tensors there: torch.rand(..., device='cuda')); "
                  "profile the host code of the top operators.")
    else:
        title = (f"Launch-bound: the device is idle {pct(1 - busy)} {ctx.of_each} while the host launches "
                 f"{len(eager) / n:,.0f} kernels one by one, {duration_us(measured['host_per_launch_us'])} of host "
                 "time each" + (f" (median kernel {duration_us(measured['median_kernel_us'])})" if len(kernels) else ""))
        action = ("Launch the step once instead of kernel by kernel: capture it as a CUDA/HIP graph "
                  "(torch.compile(mode='reduce-overhead'), or torch.cuda.CUDAGraph for a decode loop); fuse "
                  "small kernels (torch.compile); give each kernel more work (a larger batch).")
    rule = "graph_replays" if mode == "graph" else "launch_bound"
    return make_finding(ctx, rule, hits, title=title, measured=measured, operators=ops, action=action)


def _per(ctx: Context) -> str:
    return " per step" if ctx.has_steps else ""


def _count(x: float) -> str:
    return f"{x:,.0f}" if x >= 1 else f"{x:g}"


def _setup_call(t, host: np.ndarray, host_ns: float) -> str:
    """The runtime call (not a launch, copy or wait) that holds most of the host's time, when
    it holds at least a third of it: one-time setup (context creation, allocation, module
    loading) that a profile of a longer run would amortise."""
    rt = host[(t.kind[host] == Kind.RUNTIME) & ((t.flags[host] & (FLAG_LAUNCH | FLAG_SYNC)) == 0)]
    if not len(rt) or host_ns <= 0:
        return ""
    names, inv = np.unique(t.name[rt], return_inverse=True)
    total = np.bincount(inv, weights=t.dur[rt].astype(np.float64))
    j = int(np.argmax(total))
    if total[j] < host_ns / 3:
        return ""
    return (f"{share(total[j] / host_ns)} of it in {t.strings[int(names[j])]} ({duration(total[j])}), runtime setup "
            "(context creation, allocation or module loading) that a longer run pays once")


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
