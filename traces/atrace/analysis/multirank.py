"""Distributed jobs: the ranks side by side, collective skew, stragglers, and a critical path
across ranks through matched collectives.

Collectives are matched across ranks by **process group and sequence number** where the
args carry them (recent PyTorch writes ``Process Group Name`` and ``Seq``), otherwise by
**collective name and order on each rank's communication stream** (the k-th all-reduce on
the first communication stream of every rank is one collective). The result says which rule
matched. Ranks' clocks are aligned by ``baseTimeNanoseconds`` where the traces give it.

A collective completes on every rank only once the last rank has arrived. For the
cross-rank path, the ranks' traces are merged into one and, for each matched collective,
the time an early rank spends inside it before the last arrival becomes a wait (a SYNC
slice, not work) while the rest stays communication; a ``collective`` edge runs from the
last arrival to every other rank's member. The longest path then goes through whichever
rank held everybody up.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..model.builder import finish_trace
from ..model.kinds import collectives
from ..model.stats import us
from ..model.trace import ArgStore, EdgeKind, Kind, StringTable, Trace, Track
from .breakdown import operator_breakdown
from .communication import communication
from .paths.critical_path import CriticalPath, critical_path

RULE_PG_SEQ = "process group + sequence number"
RULE_NAME_ORDER = "collective name + order on the communication stream"


@dataclass
class Collective:
    """One collective matched across ranks."""

    key: tuple
    name: str
    members: dict[int, int]  # rank -> event index in that rank's trace
    start_ns: dict[int, int]  # rank -> aligned start
    end_ns: dict[int, int]

    @property
    def skew_ns(self) -> int:
        return max(self.start_ns.values()) - min(self.start_ns.values())

    @property
    def last_rank(self) -> int:
        return max(self.start_ns, key=self.start_ns.get)


@dataclass
class Job:
    traces: list[Trace]
    ranks: list[int]
    offsets_ns: list[int]  # added to each rank's times to align the clocks
    rule: str | None
    collectives: list[Collective] = field(default_factory=list)

    def lateness_ns(self) -> dict[int, int]:
        """Per rank: total time the others waited for it at collectives (its lateness)."""
        out = dict.fromkeys(self.ranks, 0)
        for c in self.collectives:
            first = min(c.start_ns.values())
            for r, s in c.start_ns.items():
                out[r] += s - first
        return out

    def stragglers(self) -> list[dict[str, Any]]:
        """Ranks by how often and how much they arrived last at collectives."""
        late = self.lateness_ns()
        last = defaultdict(int)
        for c in self.collectives:
            last[c.last_rank] += 1
        n = max(len(self.collectives), 1)
        rows = [{"rank": r, "last_at": last[r], "last_share": round(last[r] / n, 4),
                 "lateness_us": us(late[r])} for r in self.ranks]
        rows.sort(key=lambda row: -row["lateness_us"])
        median = float(np.median([row["lateness_us"] for row in rows])) if rows else 0.0
        for row in rows:
            row["straggler"] = bool(self.collectives) and row["lateness_us"] > 2 * median and row["last_share"] >= 0.5
        return rows

    def skew(self, top: int | None = None) -> list[dict[str, Any]]:
        rows = [{"collective": c.name, "key": list(c.key), "skew_us": us(c.skew_ns), "last_rank": c.last_rank,
                 "arrival_us": {str(r): us(s - min(c.start_ns.values())) for r, s in sorted(c.start_ns.items())}}
                for c in self.collectives]
        rows.sort(key=lambda row: -row["skew_us"])
        return rows[:top] if top else rows

    def per_rank(self) -> list[dict[str, Any]]:
        return [rank_row(r, t) for r, t in zip(self.ranks, self.traces)]

    def side_by_side(self, top: int = 20) -> list[dict[str, Any]]:
        """Device operators with their total time on every rank, largest first."""
        return side_by_side_rows(self.ranks, [device_op_totals(t) for t in self.traces], top)

    def to_dict(self, top: int | None = 20) -> dict[str, Any]:
        return {
            "ranks": self.ranks,
            "match_rule": self.rule,
            "collectives_matched": len(self.collectives),
            "per_rank": self.per_rank(),
            "side_by_side": self.side_by_side(top or 1_000_000),
            "skew": self.skew(top),
            "stragglers": self.stragglers(),
        }


def rank_row(rank: int, trace: Trace) -> dict[str, Any]:
    """One rank's figures: events, span, busy time by side, the device time's split."""
    bd = operator_breakdown(trace)
    comm = communication(trace)
    t0, t1 = trace.span()
    return {
        "rank": rank,
        "file": trace.meta.get("file", ""),
        "events": len(trace),
        "span_us": us(t1 - t0),
        "busy_us": {k: us(v) for k, v in bd.busy_ns.items()},
        "communication": {k: v["share"] for k, v in comm["split"].items()},
        "overlap_share": comm["overlap"]["share"],
        "top_device_ops": bd.rows("device", top=5),
    }


def device_op_totals(trace: Trace) -> dict[str, float]:
    """Total time (us) of each device operator of a rank."""
    return {row["op"]: row["total_us"] for row in operator_breakdown(trace, side="device").rows("device")}


def side_by_side_rows(ranks: list[int], totals: list[dict[str, float]], top: int = 20) -> list[dict[str, Any]]:
    """Device operators with their total time on every rank (``totals``: per rank, op ->
    us), largest first."""
    by_op: dict[str, dict[int, float]] = defaultdict(dict)
    for r, ops in zip(ranks, totals):
        for op, total in ops.items():
            by_op[op][r] = total
    rows = []
    for op, by_rank in by_op.items():
        values = [by_rank.get(r, 0.0) for r in ranks]
        rows.append({"op": op, "total_us": {str(r): v for r, v in zip(ranks, values)},
                     "max_over_min": round(max(values) / min(values), 4) if min(values) > 0 else None,
                     "sum_us": round(sum(values), 3)})
    rows.sort(key=lambda row: -row["sum_us"])
    return rows[:top]


def analyse_job(traces: list[Trace]) -> Job:
    """Align the ranks' clocks and match their collectives."""
    ranks = [int(t.meta.get("rank", k)) for k, t in enumerate(traces)]
    bases = [t.meta.get("baseTimeNanoseconds") for t in traces]
    if all(isinstance(b, int) for b in bases):
        offsets = [b - min(bases) for b in bases]
    else:
        offsets = [0] * len(traces)
    per_rank = [_comm_events(t) for t in traces]
    rule = _rule(per_rank)
    collectives = _match(traces, ranks, offsets, per_rank, rule) if rule else []
    return Job(traces, ranks, offsets, rule, collectives)


def _comm_events(trace: Trace) -> list[tuple[int, dict]]:
    """(event, collective facts) of the communication on the rank's devices, in time order."""
    idx = np.flatnonzero(trace.on_device & (trace.kind == Kind.COMM) & trace.is_slice)
    idx = idx[np.argsort(trace.ts[idx], kind="stable")]
    strings = trace.strings.strings
    events = idx.tolist()
    return [(e, info or {"collective": strings[trace.name[e]]}) for e, info in zip(events, collectives(trace, events))]


def _rule(per_rank: list[list[tuple[int, dict]]]) -> str | None:
    if not any(per_rank):
        return None
    with_seq = all(info.get("group") is not None and info.get("seq") is not None
                   for events in per_rank for _, info in events)
    return RULE_PG_SEQ if with_seq else RULE_NAME_ORDER


def _keys(trace: Trace, events: list[tuple[int, dict]], rule: str) -> list[tuple]:
    if rule == RULE_PG_SEQ:
        return [("pg", str(info["group"]), int(info["seq"])) for _, info in events]
    # Streams numbered by their first collective; the k-th of a name on a stream matches.
    first_seen: dict[int, int] = {}
    for e, _ in events:
        first_seen.setdefault(int(trace.track[e]), len(first_seen))
    counts: dict[tuple, int] = defaultdict(int)
    keys = []
    for e, info in events:
        stream = first_seen[int(trace.track[e])]
        k = (stream, info["collective"])
        keys.append(("order", stream, info["collective"], counts[k]))
        counts[k] += 1
    return keys


#: A rank's k-th collective is matched with another's (k + shift)-th where their ends agree
#: this much better than unshifted (a collective ends on every rank at once).
ALIGN_GAIN = 4.0
MAX_SHIFT = 3


def _align_orders(keyed: list[list[tuple]], ends: list[list[int]]) -> list[list[tuple]]:
    """Order keys shifted where a capture window cut a collective on some ranks only.

    A window that opens while an early rank already waits inside a collective leaves that
    collective out of the early rank's trace but in the late rank's: the k-th of each no
    longer match. Every rank leaves a collective together (once the last has arrived), so for
    each stream and name the shift (up to MAX_SHIFT) whose ends agree best with the first
    rank's is taken, when it agrees ALIGN_GAIN times better than none."""
    if len(keyed) < 2:
        return keyed
    ref: dict[tuple, list[int]] = defaultdict(list)
    for key, end in zip(keyed[0], ends[0]):
        ref[key[:3]].append(end)
    out = [keyed[0]]
    for keys, rank_ends in zip(keyed[1:], ends[1:]):
        mine: dict[tuple, list[int]] = defaultdict(list)
        for key, end in zip(keys, rank_ends):
            mine[key[:3]].append(end)
        shifts = {group: _best_shift(ref[group], mine[group]) for group in mine if group in ref}
        out.append([(*key[:3], key[3] - shifts.get(key[:3], 0)) for key in keys])
    return out


def _best_shift(ref: list[int], mine: list[int]) -> int:
    """The shift s such that mine[k + s] and ref[k] are one collective (0 when unsure)."""
    a, b = np.asarray(ref, np.float64), np.asarray(mine, np.float64)

    def disagreement(shift: int) -> float:
        lo, hi = max(0, -shift), min(len(a), len(b) - shift)
        if hi - lo < 3:
            return np.inf
        return float(np.median(np.abs(b[lo + shift : hi + shift] - a[lo:hi])))

    scores = {shift: disagreement(shift) for shift in range(-MAX_SHIFT, MAX_SHIFT + 1)}
    best = min(scores, key=scores.get)
    return best if best != 0 and scores[best] * ALIGN_GAIN < scores[0] else 0


def _match(traces, ranks, offsets, per_rank, rule) -> list[Collective]:
    found: dict[tuple, Collective] = {}
    spans = []
    for t, off, events in zip(traces, offsets, per_rank):
        at = np.array([e for e, _ in events], np.int64)
        spans.append(((t.ts[at] + off).tolist(), (t.end[at] + off).tolist()))
    keyed = [_keys(t, events, rule) for t, events in zip(traces, per_rank)]
    if rule == RULE_NAME_ORDER:
        keyed = _align_orders(keyed, [ends for _, ends in spans])
    for r, events, keys, (starts, ends) in zip(ranks, per_rank, keyed, spans):
        for key, (e, info), start, end in zip(keys, events, starts, ends):
            c = found.get(key)
            if c is None:
                c = found[key] = Collective(key, info["collective"], {}, {}, {})
            c.members[r] = e
            c.start_ns[r] = start
            c.end_ns[r] = end
    matched = [c for c in found.values() if len(c.members) >= 2]
    matched.sort(key=lambda c: min(c.start_ns.values()))
    return matched


# -- the critical path across ranks ------------------------------------------------------
def cross_rank_critical_path(job: Job) -> CriticalPath:
    """The critical path of the whole job, through matched collectives."""
    merged, first, rank_of_track = merge_ranks(job)
    add_collective_waits(merged, job, first)
    cp = critical_path(merged)
    on_path = rank_of_track[merged.track[cp.events]]
    by_rank = np.bincount(np.searchsorted(job.ranks, on_path), weights=cp.on_path_ns, minlength=len(job.ranks))
    hops = [(int(a), int(b)) for a, b in zip(on_path[:-1], on_path[1:]) if a != b]
    cp.extra.update({
        "match_rule": job.rule,
        "ranks_on_path": {str(r): us(v) for r, v in zip(job.ranks, by_rank)},
        "rank_hops": hops[:200],
        "collective_edges": int((merged.edge_kind == EdgeKind.COLLECTIVE).sum()),
    })
    return cp


def merge_ranks(job: Job) -> tuple[Trace, list[int], np.ndarray]:
    """One trace holding every rank (tracks prefixed by rank, clocks aligned).

    Returns it, the index of each rank's first event in it and the rank of each track.
    """
    strings = StringTable([""])
    cols: dict[str, list[np.ndarray]] = defaultdict(list)
    tracks: list[Track] = []
    track_rank: list[int] = []
    blobs = []
    first = []
    count = 0
    for r, t, off in zip(job.ranks, job.traces, job.offsets_ns):
        remap = np.array([strings.intern(x) for x in t.strings.strings], np.int32)
        for c in ("name", "cat", "op"):
            cols[c].append(remap[getattr(t, c)])
        for c in ("kind", "ph", "dur", "corr", "ext", "flags"):
            cols[c].append(getattr(t, c))
        cols["ts"].append(t.ts + off)
        cols["track"].append(t.track + len(tracks))
        # Correlation ids are per process: keep them apart.
        cols["corr"][-1] = np.where(t.corr >= 0, t.corr + (r << 40), -1)
        for tr in t.tracks:
            new = Track(pid=f"rank {r} {tr.pid}", tid=tr.tid, process_name=f"rank {r} {tr.process_name}",
                             thread_name=tr.thread_name, is_device=tr.is_device,
                             device=r * 1024 + tr.device if tr.device >= 0 else -1, stream=tr.stream,
                             ordered=tr.ordered, sort_index=tr.sort_index)
            tracks.append(new)
            track_rank.append(r)
        lengths = np.diff(t.args.offsets)
        blobs.append((t.args.blob, lengths))
        cols["edge_src"].append(t.edge_src + count)
        cols["edge_dst"].append(t.edge_dst + count)
        cols["edge_kind"].append(t.edge_kind)
        first.append(count)
        count += len(t)
    merged = Trace(
        strings=strings,
        **{c: np.concatenate(cols[c]) for c in ("name", "cat", "op", "kind", "ph", "ts", "dur", "track",
                                                 "corr", "ext", "flags", "edge_src", "edge_dst", "edge_kind")},
        args=ArgStore.from_chunks(blobs),
        tracks=tracks,
        meta={"source": "job", "ranks": job.ranks},
    )
    flags = merged.flags
    finish_trace(merged)
    merged.flags = flags | merged.flags
    return merged, first, np.array(track_rank, np.int64)


def add_collective_waits(merged: Trace, job: Job, first: list[int]) -> None:
    """Split each early member's collective into a wait and the work, and link the last
    arrival to every other member (in place)."""
    pos = {r: k for k, r in enumerate(job.ranks)}
    waits, src, dst = [], [], []
    for c in job.collectives:
        last = c.last_rank
        arrival = c.start_ns[last]
        a = first[pos[last]] + c.members[last]
        for r, e in c.members.items():
            if r == last:
                continue
            z = first[pos[r]] + e
            start, end = int(merged.ts[z]), int(merged.end[z])
            if arrival > start:
                cut = min(arrival, end)
                waits.append((z, start, cut - start))
                merged.ts[z], merged.dur[z] = cut, end - cut
            src.append(a)
            dst.append(z)
    if waits:
        _append_waits(merged, waits)
    if src:
        merged.edge_src = np.concatenate([merged.edge_src, np.array(src, np.int64)])
        merged.edge_dst = np.concatenate([merged.edge_dst, np.array(dst, np.int64)])
        merged.edge_kind = np.concatenate([merged.edge_kind, np.full(len(src), EdgeKind.COLLECTIVE, np.uint8)])
    merged._cache.clear()


def _append_waits(merged: Trace, waits: list[tuple[int, int, int]]) -> None:
    """Add one SYNC slice per wait, on the collective's track."""
    of = np.array([w[0] for w in waits], np.int64)
    name = merged.strings.intern("wait for the last rank")
    n = len(waits)
    merged.name = np.concatenate([merged.name, np.full(n, name, np.int32)])
    merged.cat = np.concatenate([merged.cat, merged.cat[of]])
    merged.op = np.concatenate([merged.op, np.full(n, name, np.int32)])
    merged.kind = np.concatenate([merged.kind, np.full(n, Kind.SYNC, np.uint8)])
    merged.ph = np.concatenate([merged.ph, merged.ph[of]])
    merged.ts = np.concatenate([merged.ts, np.array([w[1] for w in waits], np.int64)])
    merged.dur = np.concatenate([merged.dur, np.array([w[2] for w in waits], np.int64)])
    merged.track = np.concatenate([merged.track, merged.track[of]])
    merged.corr = np.concatenate([merged.corr, np.full(n, -1, np.int64)])
    merged.ext = np.concatenate([merged.ext, np.full(n, -1, np.int64)])
    merged.flags = np.concatenate([merged.flags, np.zeros(n, np.uint8)])
    merged.args = ArgStore(merged.args.blob, np.concatenate([merged.args.offsets,
                                                             np.full(n, merged.args.offsets[-1])]))
