"""One rank of a distributed job, digested: what the cross-rank step needs of it, small
enough for many ranks to meet in one process.

Reading a rank's trace is the costly part of analysing a job, so each rank is read once, on
its own (a per-rank task), and leaves a digest:

* its **figures**: the row the job's per-rank table shows (events, span, busy time, the
  device time's split into computation / communication / memory, as
  :func:`~.multirank.rank_row` computes it for the CLI), its device operators' totals, and
  its time split into busy / communication / idle: device busy with computation or copies,
  in communication only, or doing nothing;
* a **slim trace**: the rank's device work (kernels, copies, collectives with their args)
  and its step annotations -- all that collective matching, arrival skew, the straggler
  rule and the cross-rank path read, a third or less of the events.

:func:`digest_bytes` / :func:`read_digest` carry a digest as one ``.npz`` file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..io.npz import npz_bytes, read_npz
from ..model.kinds import COMMUNICATION, COMPUTATION, MEMORY, WORK_CLASSES, work_classes
from ..model.stats import merge_intervals, us
from ..model.trace import DEVICE_KINDS, ArgStore, Kind, Trace, Track
from .multirank import device_op_totals, rank_row

__all__ = ["RankDigest", "digest_bytes", "rank_digest", "read_digest", "slim_trace", "time_split"]

STEP_NAME = re.compile(r"^(ProfilerStep#|step#)\d+$")
#: A collective a CPU rank runs on its host (gloo's worker threads annotate each one).
HOST_COLLECTIVE = re.compile(r"^gloo:[a-z_]+$")
_DEVICE_WORK = np.array([int(k) for k in DEVICE_KINDS], np.uint8)


@dataclass
class RankDigest:
    rank: int
    figures: dict[str, Any]
    slim: Trace


def slim_trace(trace: Trace) -> Trace:
    """The rank's device work and step annotations; arguments kept on collectives only."""
    device = trace.on_device & np.isin(trace.kind, _DEVICE_WORK)
    strings = trace.strings.strings
    step_ids = np.array([i for i, s in enumerate(strings) if STEP_NAME.match(s)], np.int32)
    steps = (trace.kind == Kind.ANNOTATION) & np.isin(trace.name, step_ids) & ~trace.on_device
    keep = np.flatnonzero(device | steps)
    comm = trace.kind[keep] == Kind.COMM
    blobs = [trace.args.raw(int(e)) if c else b"" for e, c in zip(keep.tolist(), comm.tolist())]
    lengths = np.fromiter((len(b) for b in blobs), np.int64, count=len(blobs))
    slim = trace.take(keep)
    slim.args = ArgStore.from_chunks([(b"".join(blobs), lengths)])
    slim.edge_src = slim.edge_dst = np.zeros(0, np.int64)
    slim.edge_kind = np.zeros(0, np.uint8)
    return slim


def time_split(trace: Trace, window: tuple[int, int] | None = None) -> dict[str, float]:
    """The rank's time in ``window`` (default its span), in us: ``busy`` (its devices
    computing or copying), ``communication`` (communicating only) and ``idle``."""
    start, end = window if window is not None else trace.span()
    classes = work_classes(trace)
    work = np.flatnonzero(np.isin(classes, [WORK_CLASSES.index(COMPUTATION), WORK_CLASSES.index(MEMORY)]))
    comm = np.flatnonzero(classes == WORK_CLASSES.index(COMMUNICATION))
    busy = union_in(trace, work, start, end)
    any_work = union_in(trace, np.concatenate([work, comm]), start, end)
    total = max(end - start, 0)
    return {"busy": us(busy), "communication": us(any_work - busy), "idle": us(total - any_work)}


def union_in(trace: Trace, events: np.ndarray, start: int, end: int) -> int:
    if not len(events):
        return 0
    s, e = merge_intervals(np.clip(trace.ts[events], start, end), np.clip(trace.end[events], start, end))
    return int((e - s).sum())


def host_communication(trace: Trace) -> int:
    """A rank with no device work (a CPU job on gloo) communicates on its host: its
    collectives (``gloo:<op>`` on gloo's worker threads, from the call until every rank has
    arrived) move to one device-like track of communication, so the job's matching, arrival
    skew and waiting read them as they read a GPU's NCCL kernels. In place; the count moved."""
    if np.any(trace.on_device & np.isin(trace.kind, _DEVICE_WORK)):
        return 0
    ids = np.array([i for i, s in enumerate(trace.strings.strings) if HOST_COLLECTIVE.match(s)], np.int32)
    moved = np.flatnonzero(np.isin(trace.name, ids) & trace.is_slice) if len(ids) else np.zeros(0, np.int64)
    if not len(moved):
        return 0
    first = trace.tracks[int(trace.track[moved[0]])]
    trace.tracks.append(Track(pid=first.pid, tid="collectives", process_name=first.process_name,
                              thread_name="collectives on the host (gloo)", is_device=True, ordered=False))
    trace.track[moved] = len(trace.tracks) - 1
    trace.kind[moved] = Kind.COMM
    trace._cache.clear()
    return len(moved)


def rank_digest(trace: Trace, rank: int | None = None) -> RankDigest:
    """The digest of one rank's full trace (``rank``: its number, else the trace's own, as
    reading a job or its ``distributedInfo`` gave it). A CPU rank's host collectives count as
    its communication (:func:`host_communication`)."""
    if rank is None:
        info = trace.meta.get("distributedInfo")
        own = info.get("rank") if isinstance(info, dict) else None
        rank = trace.meta.get("rank", own if isinstance(own, int) else 0)
    rank = int(rank)
    trace.meta["rank"] = rank
    host_communication(trace)
    figures = rank_row(rank, trace)
    t0, t1 = trace.span()
    figures.update({
        "start_us": us(t0),
        "end_us": us(t1),
        "time_us": time_split(trace),
        "device_ops": device_op_totals(trace),
    })
    return RankDigest(rank, figures, slim_trace(trace))


def digest_bytes(digest: RankDigest) -> bytes:
    slim = digest.slim
    meta = dict(slim.meta)
    slim.meta = {**meta, "rank": digest.rank, "rank_figures": digest.figures}
    try:
        return npz_bytes(slim)
    finally:
        slim.meta = meta


def read_digest(data: bytes) -> RankDigest:
    slim = read_npz(data)
    figures = slim.meta.pop("rank_figures")
    return RankDigest(int(slim.meta["rank"]), figures, slim)
