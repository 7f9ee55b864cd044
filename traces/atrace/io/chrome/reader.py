"""Reading Chrome trace event JSON and PyTorch profiler (Kineto) JSON.

:func:`read_chrome` reads the events as a stream (see :mod:`.jsonstream`), a batch at a
time into column chunks, so memory grows with the number of events kept, not with the size
of the JSON text. Categories map onto :class:`~traces.atrace.model.trace.Kind`; flow events
become launch links and dependency edges (:mod:`.chrome_flows`).
"""

from __future__ import annotations

import gc
import re
from collections import defaultdict
from collections.abc import Callable, Iterable
from typing import Any, BinaryIO

import numpy as np
import orjson

from ...errors import TraceFormatError
from ...model.builder import TraceBuilder
from ...model.kinds import classify_device_work
from ...model.trace import NO_ID, Kind, Trace
from .batch import EVENTS_DECODER, KIND_BY_CATEGORY, Batch, Complete, Flows, parse_batch
from .flows import resolve_flows
from .jsonstream import ChromeEventStream
from .timeparse import NotANumber, us_text_to_ns, us_to_ns

_UNSET_KIND = 255
_IGNORED_PHASES = set("NODPcvV()STFp")
_INSTANT_PHASES = set("iIRn")


_EVENTS_DECODER = EVENTS_DECODER  # decodes a batch into records (the streaming tests use it)


def _as_dict(other: tuple, where: str, ordinal: int) -> dict[str, Any]:
    """An event that is neither complete nor a flow, as a dict (its args decoded)."""
    _k, ph, name, cat, ts, _dur, pid, tid, ident, _bp, raw = other
    try:
        args = orjson.loads(raw) if raw else None
    except orjson.JSONDecodeError:
        raise TraceFormatError("malformed 'args'", f"{where}, traceEvents[{ordinal}]") from None
    d = {"ph": ph, "name": name, "cat": cat, "pid": pid, "tid": tid, "id": ident, "args": args}
    if ts:
        d["ts"] = ts
    return d


class _ChromeReader:
    def __init__(self, where: str):
        self.where = where
        self.b = TraceBuilder()
        self.kind_of_cat: list[int] = []
        self.process_names: dict[Any, str] = {}
        self.process_sort: dict[Any, int] = {}
        self.thread_names: dict[tuple, str] = {}
        self.thread_sort: dict[tuple, int] = {}
        self.flows: list[tuple[Flows, int]] = []  # per batch, with its first ordinal
        self.open_b: dict[int, list[tuple]] = defaultdict(list)
        self.async_open: dict[tuple, list[tuple]] = defaultdict(list)
        self.warnings: list[str] = []
        self.correlated = False
        self.pid_ids: dict = {}
        self.tid_ids: dict = {}

    def _err(self, what: str, ordinal: int) -> TraceFormatError:
        return TraceFormatError(what, f"{self.where}, traceEvents[{ordinal}]")

    def _kinds(self, cat_ids: np.ndarray) -> np.ndarray:
        strings = self.b.strings.strings
        table = self.kind_of_cat
        for i in range(len(table), len(strings)):
            table.append(int(KIND_BY_CATEGORY.get(strings[i].lower(), _UNSET_KIND)))
        return np.asarray(table, np.uint8)[cat_ids]

    def _tracks(self, keys: list[tuple]) -> np.ndarray:
        """Track index per distinct (name, cat, pid, tid): pid and tid values are numbered
        (in order of first appearance), then the batch's new (pid, tid) pairs become tracks
        in the order of those numbers."""
        p_idx = self._number(self.pid_ids, [k[2] for k in keys])
        t_idx = self._number(self.tid_ids, [k[3] for k in keys])
        pair = p_idx * (1 << 32) + t_idx
        uniq, inv = np.unique(pair, return_inverse=True)
        pid_vals, tid_vals = list(self.pid_ids), list(self.tid_ids)
        tracks = np.array(
            [self.b.track(pid_vals[int(u) >> 32], tid_vals[int(u) & 0xFFFFFFFF]) for u in uniq.tolist()],
            np.int32,
        )
        return tracks[inv]

    @staticmethod
    def _number(table: dict, values: list) -> np.ndarray:
        ids = list(map(table.get, values))
        if None in ids:
            for v in dict.fromkeys(v for v, i in zip(values, ids) if i is None):
                table[v] = len(table)
            ids = list(map(table.get, values))
        return np.array(ids, np.int64)

    def add_batch(self, batch: Batch, first: int) -> None:
        """Merge a decoded batch whose first event is ``traceEvents[first]``: its flows are
        kept for the end, its other events handled in order, then its complete events."""
        if batch.flows is not None:
            self.flows.append((batch.flows, first))
            if self.correlated:
                self._drop_ac2g(len(self.flows) - 1)
        for other in batch.others:
            ordinal = first + other[0]
            self._other(_as_dict(other, self.where, ordinal), other[1], ordinal)
        if batch.x is not None:
            self._add_complete(batch.x, first)

    def _drop_ac2g(self, k: int) -> None:
        """Let go of a kept batch's ``ac2g`` flows (once kernels carry correlation ids)."""
        fl, first = self.flows[k]
        self.flows[k] = (fl.without("ac2g"), first)

    def _add_complete(self, x: Complete, first: int) -> None:
        if x.error is not None:
            what, k = x.error
            raise self._err(what, first + (int(x.local[k]) if x.local is not None else k))
        b = self.b
        strings = b.strings
        name_of_key = strings.intern_many([k[0] for k in x.keys])
        cat_of_key = strings.intern_many([k[1] for k in x.keys])
        track_of_key = self._tracks(x.keys)
        names = name_of_key[x.key]
        cats = cat_of_key[x.key]
        kinds = self._kinds(cat_of_key)[x.key]
        if not self.correlated and ((kinds == Kind.KERNEL) & (x.corr >= 0)).any():
            self.correlated = True  # kernels carry correlation ids: ac2g flows would only repeat them
            for k in range(len(self.flows)):
                self._drop_ac2g(k)
        op = names
        if x.op_types:
            op = names.copy()
            for k, t in x.op_types:
                op[k] = strings.intern(t)
        n = len(x)
        b.add_columns(
            {
                "name": names,
                "cat": cats,
                "op": op,
                "kind": kinds,
                "ph": np.full(n, ord("X"), np.uint8),
                "ts": x.ts,
                "dur": x.dur,
                "track": track_of_key[x.key],
                "corr": x.corr,
                "ext": x.ext,
            },
            (x.args, x.arg_len),
        )

    def _time(self, e: dict, key: str, ordinal: int) -> int:
        v = e.get(key)
        try:
            return us_text_to_ns(v) if isinstance(v, bytes) else us_to_ns(v)
        except NotANumber:
            shown = v.decode("utf-8", "replace") if isinstance(v, bytes) else repr(v)
            raise self._err(f"'{key}' is {shown[:40]}, not a number (event {e.get('name')!r})", ordinal) from None

    def _add_one(self, e: dict, ph: str, ts: int, dur: int, track: int, kind: Kind | None = None) -> None:
        cat = str(e.get("cat", ""))
        args = e.get("args") or None
        if args is not None and not isinstance(args, dict):
            raise TraceFormatError("'args' must be an object", self.where)
        if kind is None:
            kind = KIND_BY_CATEGORY.get(cat.lower(), _UNSET_KIND)
        self.b.add(
            str(e.get("name", "")),
            ts,
            dur,
            track,
            kind=kind,
            cat=cat,
            op=str(args["op_type"]) if args and "op_type" in args else None,
            ph=ph,
            corr=int(args.get("correlation", NO_ID)) if args else NO_ID,
            ext=int(args.get("External id", NO_ID)) if args else NO_ID,
            args=args,
        )

    def _other(self, e: dict, ph: Any, ordinal: int) -> None:
        if ph == "M":
            self._metadata(e)
        elif ph in ("B", "E"):
            self._begin_end(e, ph, ordinal)
        elif ph in _INSTANT_PHASES:
            track = self.b.track(e.get("pid", 0), e.get("tid", 0))
            self._add_one(e, "i", self._time(e, "ts", ordinal), 0, track, Kind.INSTANT)
        elif ph == "C":
            track = self.b.track(e.get("pid", 0), f"counter {e.get('name', '')}")
            self._add_one(e, "C", self._time(e, "ts", ordinal), 0, track, Kind.COUNTER)
        elif ph in ("b", "e"):
            self._async(e, ph, ordinal)
        elif ph in _IGNORED_PHASES:
            pass
        elif ph is None:
            raise self._err(f"event has no 'ph' (phase) field (event {e.get('name')!r})", ordinal)
        else:
            raise self._err(f"unknown phase {ph!r} (event {e.get('name')!r})", ordinal)

    def _begin_end(self, e: dict, ph: str, ordinal: int) -> None:
        """A 'B' opens a slice on its thread; the next 'E' there closes it (args merged)."""
        track = self.b.track(e.get("pid", 0), e.get("tid", 0))
        if ph == "B":
            self.open_b[track].append((self._time(e, "ts", ordinal), e, ordinal))
            return
        stack = self.open_b[track]
        if not stack:
            raise self._err("'E' event without a matching 'B' on its thread", ordinal)
        ts0, begin, _ = stack.pop()
        ts1 = self._time(e, "ts", ordinal)
        if ts1 < ts0:
            raise self._err(f"'E' event ends before its 'B' began (negative duration, {begin.get('name')!r})", ordinal)
        if e.get("args"):
            begin = dict(begin, args={**(begin.get("args") or {}), **e["args"]})
        self._add_one(begin, "X", ts0, ts1 - ts0, track)

    def _async(self, e: dict, ph: str, ordinal: int) -> None:
        """Async 'b' / 'e' pairs, matched by process, category, id and name."""
        key = (e.get("pid", 0), e.get("cat", ""), e.get("id2", e.get("id")), e.get("name", ""))
        if ph == "b":
            self.async_open[key].append((self._time(e, "ts", ordinal), e))
            return
        stack = self.async_open.get(key)
        if not stack:
            raise self._err("async 'e' event without a matching 'b'", ordinal)
        ts0, begin = stack.pop()
        ts1 = self._time(e, "ts", ordinal)
        if ts1 < ts0:
            raise self._err("async event ends before it began (negative duration)", ordinal)
        track = self.b.track(e.get("pid", 0), f"async {e.get('cat', '')}", ordered=False)
        self._add_one(begin, "X", ts0, ts1 - ts0, track)

    def _metadata(self, e: dict) -> None:
        name = e.get("name")
        args = e.get("args") or {}
        pid, tid = e.get("pid", 0), e.get("tid", 0)
        if name == "process_name":
            self.process_names[pid] = str(args.get("name", ""))
        elif name == "process_labels" and not self.process_names.get(pid):
            self.process_names.setdefault(pid, str(args.get("labels", "")))
        elif name == "thread_name":
            self.thread_names[(pid, tid)] = str(args.get("name", ""))
        elif name == "process_sort_index":
            self.process_sort[pid] = args.get("sort_index", 0)
        elif name == "thread_sort_index":
            self.thread_sort[(pid, tid)] = args.get("sort_index", 0)

    def finish(self, meta: dict) -> Trace:
        b = self.b
        for stack in self.open_b.values():
            for _ts, _begin, ordinal in stack:
                self.warnings.append(f"traceEvents[{ordinal}]: 'B' event never ended; dropped")
        for t in b.tracks:
            t.process_name = self.process_names.get(t.pid, t.process_name)
            t.thread_name = self.thread_names.get((t.pid, t.tid), t.thread_name)
            t.sort_index = int(self.thread_sort.get((t.pid, t.tid), 0) or 0)
        b.meta.update(meta)
        if self.warnings:
            b.meta["warnings"] = self.warnings[:100]
        trace = b.build(finish=False)
        _generic_op_names(trace)
        _resolve_unset_kinds(trace)
        from ...model.builder import finish_trace

        finish_trace(trace)
        classify_device_work(trace)
        resolve_flows(trace, self.flows, self)
        for i, t in enumerate(trace.tracks):
            if t.is_device:
                _device_and_stream(trace, i, t)
        kineto = "schemaVersion" in meta or "distributedInfo" in meta or any(
            trace.strings.lookup(c) >= 0 for c in ("cpu_op", "cuda_runtime", "kernel")
        )
        trace.meta["source"] = "kineto" if kineto else "chrome"
        return trace


_NUMBERED = re.compile(r"^(.*\S)\s*#\d+$")


def _generic_op_names(trace: Trace) -> None:
    """Operator type of numbered ranges: 'ProfilerStep#7' -> 'ProfilerStep'."""
    strings = trace.strings
    used = np.flatnonzero(np.bincount(trace.op, minlength=len(strings)))
    remap = np.arange(len(strings), dtype=np.int32)
    changed = False
    for i in used.tolist():
        m = _NUMBERED.match(strings[i])
        if m:
            remap[i] = strings.intern(m.group(1))
            changed = True
    if changed:
        trace.op = remap[trace.op]


def _resolve_unset_kinds(trace: Trace) -> None:
    unset = trace.kind == _UNSET_KIND
    if unset.any():
        # Before tracks are classified: a track is a device track by its process name.
        from ...model.builder import _DEVICE_PROCESS

        dev = np.array([bool(_DEVICE_PROCESS.match(t.process_name or "")) for t in trace.tracks], bool)
        on_dev = dev[trace.track[unset]] if len(dev) else np.zeros(int(unset.sum()), bool)
        trace.kind[unset] = np.where(on_dev, int(Kind.KERNEL), int(Kind.HOST_OP))


def _device_and_stream(trace: Trace, i: int, t) -> None:
    """Fill a device track's device and stream numbers from its first event or its ids."""
    first = np.flatnonzero(trace.track == i)
    args = trace.args.get(int(first[0])) if len(first) else {}
    dev = args.get("device", t.pid)
    stream = args.get("stream", t.tid)
    t.device = dev if isinstance(dev, int) else -1
    t.stream = stream if isinstance(stream, int) else -1


def read_chrome(stream: BinaryIO, where: str = "trace", *, chunk_size: int | None = None) -> Trace:
    """Read Chrome / Kineto trace JSON from a binary stream."""
    events = ChromeEventStream(
        stream, where, decode=parse_batch, **({"chunk_size": chunk_size} if chunk_size else {})
    )
    return merge_batches(events.batches(), lambda: events.meta, where)


def merge_batches(batches: Iterable[tuple[Batch, int]], meta: Callable[[], dict], where: str) -> Trace:
    """The trace of decoded batches (each with the ordinal of its first event), in file
    order; ``meta()`` gives the file's other top-level keys once the batches are done."""
    reader = _ChromeReader(where)
    # Millions of short-lived records and no reference cycles: the cycle collector would
    # only rescan them over and over.
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        for batch, first in batches:
            reader.add_batch(batch, first)
        return reader.finish(meta())
    finally:
        if was_enabled:
            gc.enable()
