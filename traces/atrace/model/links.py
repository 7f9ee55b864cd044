"""Links inside the trace model: which runtime call launched which device work.

Part of the model, not an analysis: readers, writers (Chrome ``ac2g`` arrows, Chakra
dependencies) and analyses all need it.

Device work is linked to its launch by correlation id. Work replayed by a CUDA or HIP graph
(``cudaGraphLaunch``, ``cuGraphLaunch``, ``hipGraphLaunch``) is linked to the graph launch:
CUPTI gives every kernel of a replay the launch's correlation id, so most of it links like
any other work; where a tracer does not (ROCm's tracers carry the launch's *external* id
instead, some exporters write no correlation for graph nodes), work that no correlation id
links is attributed to a graph launch that carries the same external id, else, if its args
say it belongs to a graph (``graph id``, ``graph node id``), to the last graph launch that
began before it.
"""

from __future__ import annotations

import re

import numpy as np

from .trace import DEVICE_KINDS, Kind, Trace

_GRAPH_LAUNCH = re.compile(r"graph_?launch", re.IGNORECASE)
_GRAPH_ARG = re.compile(rb'"graph[ _]?(?:node[ _]?)?id"', re.IGNORECASE)


def launch_pairs(trace: Trace) -> tuple[np.ndarray, np.ndarray]:
    """(launching runtime event, device event) index pairs, by device event: matched by
    correlation id, and graph-replayed work to its graph launch (see the module's notes)."""
    rt, dev = _by_correlation(trace)
    launches = graph_launches(trace)
    if not len(launches):
        return rt, dev
    g_rt, g_dev = _graph_replays(trace, dev, launches)
    if not len(g_dev):
        return rt, dev
    rt, dev = np.concatenate([rt, g_rt]), np.concatenate([dev, g_dev])
    order = np.argsort(dev, kind="stable")
    return rt[order], dev[order]


def graph_replay_launches(trace: Trace) -> np.ndarray:
    """Graph launches linked to device work only by external id or graph args."""
    launches = graph_launches(trace)
    if not len(launches):
        return launches
    dev = np.flatnonzero(trace.on_device & (trace.corr >= 0) & trace.is_slice)
    rt = np.flatnonzero((trace.kind == Kind.RUNTIME) & (trace.corr >= 0) & ~trace.on_device)
    linked = dev[np.isin(trace.corr[dev], trace.corr[rt])]
    return np.unique(_graph_replays(trace, linked, launches)[0])


def graph_launches(trace: Trace) -> np.ndarray:
    """Runtime calls that launch a CUDA or HIP graph (``cudaGraphLaunch``...), in index order."""
    strings = trace.strings.strings
    ids = [i for i, s in enumerate(strings) if "raph" in s and _GRAPH_LAUNCH.search(s)]
    if not ids:
        return np.zeros(0, np.int64)
    return np.flatnonzero((trace.kind == Kind.RUNTIME) & np.isin(trace.name, ids) & ~trace.on_device)


def _by_correlation(trace: Trace) -> tuple[np.ndarray, np.ndarray]:
    dev = np.flatnonzero(trace.on_device & (trace.corr >= 0) & trace.is_slice)
    rt = np.flatnonzero((trace.kind == Kind.RUNTIME) & (trace.corr >= 0) & ~trace.on_device)
    if not len(dev) or not len(rt):
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    # Outermost runtime call first when several share a correlation id.
    order = np.lexsort((-trace.dur[rt], trace.corr[rt]))
    rt = rt[order]
    keys = trace.corr[rt]
    k = np.searchsorted(keys, trace.corr[dev])
    k_ok = k < len(keys)
    match = np.zeros(len(dev), bool)
    match[k_ok] = keys[k[k_ok]] == trace.corr[dev][k_ok]
    return rt[k[match]], dev[match]


def _graph_replays(trace: Trace, linked: np.ndarray, launches: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(graph launch, device event) pairs for device work no correlation id links."""
    work = trace.on_device & trace.is_slice & trace.kind_mask(*DEVICE_KINDS)
    work[linked] = False
    loose = np.flatnonzero(work)
    launches = launches[np.argsort(trace.ts[launches], kind="stable")]
    out_rt = np.full(len(loose), -1, np.int64)
    # By external id: the last launch with the same id that began before the work.
    ext = trace.ext[loose]
    with_ext = launches[trace.ext[launches] >= 0]
    if len(with_ext):
        order = np.lexsort((trace.ts[with_ext], trace.ext[with_ext]))
        cand = with_ext[order]
        key_ext, key_ts = trace.ext[cand], trace.ts[cand]
        k = _last_before(key_ext, key_ts, ext, trace.ts[loose])
        ok = (ext >= 0) & (k >= 0)
        ok[ok] &= key_ext[k[ok]] == ext[ok]
        out_rt[ok] = cand[k[ok]]
    # By the args: work marked as a graph node, to the last graph launch before it.
    rest = np.flatnonzero(out_rt < 0)
    if len(rest):
        marked = rest[_has_graph_arg(trace, loose[rest])]
        k = np.searchsorted(trace.ts[launches], trace.ts[loose[marked]], "right") - 1
        ok = k >= 0
        out_rt[marked[ok]] = launches[k[ok]]
    found = out_rt >= 0
    return out_rt[found], loose[found]


def _last_before(key_ext, key_ts, ext, ts) -> np.ndarray:
    """Per query (ext, ts): the position of the last key (sorted by id, then time) with an
    id and time not above the query's (-1 if none); the caller checks the id matches."""
    ids = np.unique(np.concatenate([key_ext, ext]))
    times = np.unique(np.concatenate([key_ts, ts]))
    n = len(times) + 1
    keys = np.searchsorted(ids, key_ext) * n + np.searchsorted(times, key_ts)
    queries = np.searchsorted(ids, ext) * n + np.searchsorted(times, ts)
    return np.searchsorted(keys, queries, "right") - 1


def _has_graph_arg(trace: Trace, events: np.ndarray) -> np.ndarray:
    """Per event: whether its args name a graph (``graph id``, ``graph node id``...)."""
    blob, offsets = trace.args.blob, trace.args.offsets
    hits = np.array([m.start() for m in _GRAPH_ARG.finditer(blob)], np.int64)
    if not len(hits):
        return np.zeros(len(events), bool)
    owner = np.searchsorted(offsets, hits, "right") - 1
    return np.isin(events, owner)
