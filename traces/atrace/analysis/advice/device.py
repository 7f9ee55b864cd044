"""Rules about the device: exposed communication (3), host-device copies (5) and kernel
hotspots (6)."""

from __future__ import annotations

import re

import numpy as np

from ...model.kinds import collective
from ...model.stats import covered_before, merge_intervals, us
from ...model.trace import Kind, Trace
from .common import Hit, make_finding, op_rows, pct, per_step, spans_of
from .context import Context
from .findings import Finding
from .words import duration_us

_HOST_COPY = re.compile(r"HtoD|DtoH|h2d|d2h|Host|Pageable|Pinned", re.IGNORECASE)
_PAGEABLE = re.compile(r"Pageable", re.IGNORECASE)
_WAIT_SLACK_NS = 50_000


def _device_numbers(trace: Trace) -> np.ndarray:
    seen: dict = {}
    return np.array([seen.setdefault(t.device if t.device >= 0 else ("pid", t.pid), len(seen))
                     for t in trace.tracks], np.int64)


def exposed_ns(trace: Trace, comm: np.ndarray, compute: np.ndarray) -> np.ndarray:
    """Per collective: its time not overlapped by computation on the same device."""
    device = _device_numbers(trace)
    out = trace.dur[comm].copy()
    d_comm, d_comp = device[trace.track[comm]], device[trace.track[compute]]
    for d in np.unique(d_comm).tolist():
        c, k = comm[d_comm == d], compute[d_comp == d]
        s, e = merge_intervals(trace.ts[k], trace.end[k])
        out[d_comm == d] -= (covered_before(s, e, trace.end[c]) - covered_before(s, e, trace.ts[c]))
    return out


def communication_rule(ctx: Context) -> Finding | None:
    """Rule 3: collectives not overlapped with computation; the saving is the path's with the
    collectives taking no time, at most their exposed time."""
    t = ctx.trace
    hits, comms, exposures = [], [], []
    for w in ctx.windows:
        comm = w.dev[t.kind[w.dev] == Kind.COMM]
        if not len(comm):
            continue
        exposed = exposed_ns(t, comm, w.dev[t.kind[w.dev] == Kind.KERNEL])
        saving = min(w.model.saving(work=comm), int(exposed.sum()))
        order = np.argsort(-exposed, kind="stable")
        hits.append(Hit(w, saving, comm[order], spans_of(t, comm[order][:5])))
        comms.append(comm)
        exposures.append(exposed)
    if not hits:
        return None
    comm, exposed = np.concatenate(comms), np.concatenate(exposures)
    rows = _collective_rows(t, comm, exposed)
    total, hidden = float(t.dur[comm].sum()), float(t.dur[comm].sum() - exposed.sum())
    top = rows[0]
    measured = {
        "communication_per_step_us": per_step(ctx, total),
        "exposed_per_step_us": per_step(ctx, float(exposed.sum())),
        "overlap_share": round(hidden / total, 4) if total else None,
        "collectives": rows,
        "buckets": _buckets(t, comm, exposed),
    }
    title = (f"Exposed communication: {pct(exposed.sum() / max(total, 1))} of the collectives' time is not "
             f"overlapped with computation; {top['collective']} exposes {duration_us(top['exposed_us'] / len(ctx.windows))} per step")
    action = ("Overlap the collectives with computation: with DDP let gradient buckets start during backward "
              "(a smaller bucket_cap_mb, gradient_as_bucket_view=True) and skip them with no_sync() across "
              "gradient accumulation; with FSDP prefetch (backward_prefetch, forward_prefetch); keep the "
              "collectives on their own stream and free of host synchronisation.")
    ops = op_rows(t, comm, exposed.astype(np.float64))  # the collectives' kernels, by exposed time
    return make_finding(ctx, "exposed_communication", hits, title=title, measured=measured, operators=ops,
                        action=action, cap_ns=int(exposed.sum()))


def _collective_rows(t: Trace, comm: np.ndarray, exposed: np.ndarray) -> list[dict]:
    strings = t.strings.strings
    names = t.name[comm]
    kinds = {int(n): (collective(strings[int(n)], None) or {}).get("collective") or strings[int(n)]
             for n in np.unique(names).tolist()}
    label = np.array([kinds[int(n)] for n in names.tolist()], object)
    rows = []
    for c in sorted(set(label.tolist())):
        m = label == c
        rows.append({"collective": c, "count": int(m.sum()), "time_us": us(t.dur[comm[m]].sum()),
                     "exposed_us": us(exposed[m].sum())})
    rows.sort(key=lambda r: -r["exposed_us"])
    return rows


def _buckets(t: Trace, comm: np.ndarray, exposed: np.ndarray, top: int = 10) -> list[dict]:
    """The collectives (buckets) that expose the most, with their size where the args say."""
    out = []
    for k in np.argsort(-exposed, kind="stable")[:top].tolist():
        e = int(comm[k])
        info = collective(t.strings[t.name[e]], t.args.get(e)) or {}
        out.append({"event": e, "collective": info.get("collective"), "bytes": info.get("bytes"),
                    "start_us": us(t.ts[e]), "time_us": us(t.dur[e]), "exposed_us": us(exposed[k])})
    return out


def copies_rule(ctx: Context) -> Finding | None:
    """Rule 5: host-device copies that cost the path: pageable or blocking ones (the host
    waits in the copy call), ones on a stream that runs kernels (they serialise with them),
    and many small ones. The saving is the path's with the blocking calls taking no time
    (the copy itself still takes its time), the copies on a kernel stream taking none there,
    and the small copies and their calls taking none."""
    t = ctx.trace
    lim = ctx.limits
    hits, counts = [], {"copies": 0, "pageable_or_blocking": 0, "compute_stream": 0, "small": 0}
    offenders_all = []
    host_copy = _name_mask(t, _HOST_COPY)
    pageable = _name_mask(t, _PAGEABLE)
    for w in ctx.windows:
        mem = w.dev[(t.kind[w.dev] == Kind.MEMCPY) & host_copy[t.name[w.dev]]]
        if not len(mem):
            continue
        calls = ctx.launcher[mem]
        has = calls >= 0
        blocking = pageable[t.name[mem]].copy()
        blocking[has] |= (t.end[calls[has]] >= t.end[mem[has]]) & (t.ts[mem[has]] > t.ts[calls[has]])
        # A call that waits far longer than its copy takes waits for the device (a read of a
        # result): that wait is rule 2's, not the copy's.
        blocking[has] &= t.dur[calls[has]] <= 2 * t.dur[mem[has]] + _WAIT_SLACK_NS
        kernel_tracks = np.unique(t.track[w.dev[t.kind[w.dev] == Kind.KERNEL]])
        same_stream = np.isin(t.track[mem], kernel_tracks)
        small = np.zeros(len(mem), bool)
        if len(mem) >= lim.copy_small_min_count:
            size = np.array([_bytes(t, e) for e in mem.tolist()], np.float64)
            small = size < lim.copy_small_bytes
        bad = blocking | same_stream | small
        if not bad.any():
            continue
        offenders = mem[bad]
        # Pinned and asynchronous, a copy still takes its time on its engine, but the host no
        # longer waits in the call; on its own stream it no longer holds up the kernels;
        # batched, small copies cost no launch each.
        work = np.concatenate([calls[(blocking | small) & has], mem[same_stream | small]])
        saving = w.model.saving(work=work)
        order = np.argsort(-t.dur[offenders], kind="stable")
        events = np.unique(np.concatenate([offenders[order][:25], calls[bad & has][:25]]))
        hits.append(Hit(w, saving, events, spans_of(t, offenders)))
        offenders_all.append(offenders)
        for key, m in (("copies", bad), ("pageable_or_blocking", blocking), ("compute_stream", same_stream),
                       ("small", small)):
            counts[key] += int(m.sum())
    if not hits:
        return None
    offenders = np.concatenate(offenders_all)
    n = len(ctx.windows)
    measured = {f"{k}_per_step": round(v / n, 2) for k, v in counts.items()}
    measured["copy_time_per_step_us"] = per_step(ctx, float(t.dur[offenders].sum()))
    kinds = [f"{counts[k] / n:.0f} {label}" for k, label in (
        ("pageable_or_blocking", "pageable or blocking"), ("compute_stream", "on the compute stream"),
        ("small", "small")) if counts[k]]
    title = (f"Host-device copies hold up the step: {counts['copies'] / n:.0f} per step "
             f"({', '.join(kinds)}), {duration_us(measured['copy_time_per_step_us'])} of copying per step")
    action = ("Pin the host memory of the copies (pin_memory=True in the DataLoader, tensor.pin_memory()) and copy "
              "with non_blocking=True; issue input copies on a separate stream ahead of use; batch many small "
              "copies into one (torch.cat the tensors before .to(device)).")
    return make_finding(ctx, "copies", hits, title=title, measured=measured, operators=op_rows(t, offenders),
                        action=action)


def _name_mask(t: Trace, pattern: re.Pattern) -> np.ndarray:
    """Per string id: whether the string matches."""
    return np.array([bool(pattern.search(s)) for s in t.strings.strings] + [False], bool)


def _bytes(t: Trace, e: int) -> float:
    b = t.args.get(e).get("bytes")
    return float(b) if isinstance(b, int | float) else float("inf")


def hotspot_rule(ctx: Context, device_share: float) -> Finding | None:
    """Rule 6: where the device bounds the path, the fewest kernels that hold most of the
    computation time; the saving is the path's with them taking no time (an upper bound:
    a kernel made twice as fast saves about half)."""
    lim = ctx.limits
    if device_share < lim.hotspot_device_share:
        return None
    t = ctx.trace
    kernels = [w.dev[t.kind[w.dev] == Kind.KERNEL] for w in ctx.windows]
    allk = np.concatenate(kernels) if kernels else np.zeros(0, np.int64)
    if not len(allk):
        return None
    ops, inv = np.unique(t.op[allk], return_inverse=True)
    total = np.bincount(inv, weights=t.dur[allk], minlength=len(ops))
    order = np.argsort(-total, kind="stable")
    cum = np.cumsum(total[order]) / total.sum()
    k = int(np.searchsorted(cum, lim.hotspot_kernel_share - 1e-12)) + 1
    if k > lim.hotspot_max_kernels:
        return None
    hot = ops[order[:k]]
    hits, on_path, path = [], 0, 0
    for w, ks in zip(ctx.windows, kernels):
        mine = ks[np.isin(t.op[ks], hot)]
        path += w.model.length_ns
        if not len(mine):
            continue
        on_path += w.model.on_path(mine)
        hits.append(Hit(w, w.model.saving(work=mine), mine[np.argsort(-t.dur[mine], kind="stable")],
                        spans_of(t, mine)))
    names = [t.strings[int(o)] for o in hot.tolist()]
    share = float(total[order[:k]].sum() / total.sum())
    measured = {
        "kernels": [{"op": n, "device_time_us": us(total[order[j]]), "share_of_device_time":
                     round(float(total[order[j]] / total.sum()), 4)} for j, n in enumerate(names)],
        "share_of_device_time": round(share, 4),
        "share_of_critical_path": round(on_path / max(path, 1), 4),
    }
    short = ", ".join(_short(n) for n in names)
    title = (f"Kernel hotspot: {k} kernel{'s' if k > 1 else ''} hold{'s' if k == 1 else ''} {pct(share)} of the "
             f"device time and {pct(on_path / max(path, 1))} of the critical path: {short}")
    action = (f"Optimise {_short(names[0])} first: check its shapes and dtype (tensor cores want bf16/fp16/tf32 and "
              "dimensions that are multiples of 8), fuse the memory-bound work around it (torch.compile), or use a "
              "faster implementation (cuBLASLt, FlashAttention, a tuned Triton kernel).")
    return make_finding(ctx, "kernel_hotspot", hits, title=title, measured=measured,
                        operators=op_rows(t, allk[np.isin(t.op[allk], hot)]), action=action)


def _short(name: str, width: int = 60) -> str:
    return name if len(name) <= width else name[: width - 1] + "…"
