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
from itertools import repeat
from operator import attrgetter
from typing import Any, BinaryIO

import msgspec
import numpy as np
import orjson

from ..errors import TraceFormatError
from ..model.builder import TraceBuilder
from ..model.kinds import classify_device_work
from ..model.trace import NO_ID, Kind, Trace
from .chrome_flows import resolve_flows
from .jsonstream import ChromeEventStream
from .timeparse import NotANumber, us_text_to_ns, us_texts_to_ns, us_to_ns

KIND_BY_CATEGORY = {
    "cpu_op": Kind.HOST_OP,
    "operator": Kind.HOST_OP,
    "host_op": Kind.HOST_OP,
    "python_function": Kind.PYTHON,
    "user_annotation": Kind.ANNOTATION,
    "gpu_user_annotation": Kind.ANNOTATION,
    "annotation": Kind.ANNOTATION,
    "trace": Kind.ANNOTATION,
    "cuda_runtime": Kind.RUNTIME,
    "cuda_driver": Kind.RUNTIME,
    "runtime": Kind.RUNTIME,
    "driver": Kind.RUNTIME,
    "xpu_runtime": Kind.RUNTIME,
    "privateuse1_runtime": Kind.RUNTIME,
    "mtia_runtime": Kind.RUNTIME,
    "kernel": Kind.KERNEL,
    "device_op": Kind.KERNEL,
    "gpu_memcpy": Kind.MEMCPY,
    "memcpy": Kind.MEMCPY,
    "dma": Kind.MEMCPY,
    "gpu_memset": Kind.MEMSET,
    "memset": Kind.MEMSET,
    "comm": Kind.COMM,
    "collective": Kind.COMM,
    "nccl": Kind.COMM,
    "cuda_sync": Kind.SYNC,
    "gpu_sync": Kind.SYNC,
}
_UNSET_KIND = 255
_IGNORED_PHASES = set("NODPcvV()STFp")
_INSTANT_PHASES = set("iIRn")


class _Event(msgspec.Struct, gc=False):
    """The fields of a trace event that the reader looks at; args stay raw JSON."""

    ph: str | None = None
    name: str = ""
    cat: str = ""
    ts: msgspec.Raw = msgspec.Raw(b"")  # the number's text: parsed exactly (timeparse)
    dur: float = 0.0
    pid: int | str = 0
    tid: int | str = 0
    id: int | str | None = None
    bp: str | None = None
    args: msgspec.Raw = msgspec.Raw(b"")


class _ArgsLite(msgspec.Struct, gc=False):
    correlation: int = NO_ID
    external_id: int = msgspec.field(default=NO_ID, name="External id")
    op_type: str | None = None


_TS, _DUR, _NAME, _CAT = attrgetter("ts"), attrgetter("dur"), attrgetter("name"), attrgetter("cat")
_PID, _TID, _ARGS = attrgetter("pid"), attrgetter("tid"), attrgetter("args")
_CORR, _EXT = attrgetter("correlation"), attrgetter("external_id")
_PH, _OP_TYPE = attrgetter("ph"), attrgetter("op_type")
_PHASE_CODE = {"X": 0, "s": 1, "f": 1, "t": 1}  # 0: complete, 1: flow, 3: anything else
_PHASE_CODE_OF_BYTE = np.full(256, 3, np.int8)
for _ph, _code in _PHASE_CODE.items():
    _PHASE_CODE_OF_BYTE[ord(_ph)] = _code


def _phase_codes(phases: list) -> np.ndarray:
    """Per event: 0 complete, 1 flow, 3 other. Phases are one-letter strings, so their
    join is one byte each, read at once; anything else (a missing or longer phase) is
    looked up one by one."""
    if None not in phases and "" not in phases:
        text = "".join(phases)  # no empty phase: as many letters as phases means one each
        if len(text) == len(phases) and text.isascii():
            return _PHASE_CODE_OF_BYTE[np.frombuffer(text.encode(), np.uint8)]
    return np.array(list(map(_PHASE_CODE.get, phases, repeat(3))), np.int8)


_EVENTS_DECODER = msgspec.json.Decoder(list[_Event])
_ARGS_DECODER = msgspec.json.Decoder(list[_ArgsLite])


def _as_dict(e: _Event, where: str, ordinal: int) -> dict[str, Any]:
    raw = bytes(e.args)
    try:
        args = orjson.loads(raw) if raw else None
    except orjson.JSONDecodeError:
        raise TraceFormatError("malformed 'args'", f"{where}, traceEvents[{ordinal}]") from None
    d = {"ph": e.ph, "name": e.name, "cat": e.cat, "pid": e.pid, "tid": e.tid, "id": e.id, "args": args}
    if len(e.ts):
        d["ts"] = bytes(e.ts)
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
        self.flow_events: list[tuple[_Event, int]] = []
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

    def _tracks(self, pids: list, tids: list, first: int) -> np.ndarray:
        """Track index per event: pid and tid values are numbered, then paired."""
        try:
            p_idx = self._number(self.pid_ids, pids)
            t_idx = self._number(self.tid_ids, tids)
        except TypeError:
            raise self._err("pid/tid must be a number or a string", first) from None
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

    def add_batch(self, events: list[_Event], first: int) -> None:
        phases = list(map(_PH, events))
        if phases.count("X") == len(events):
            self._add_complete(events, first + np.arange(len(events)))
            return
        code = _phase_codes(phases)
        x_idx = np.flatnonzero(code == 0)
        flows = np.flatnonzero(code == 1).tolist()
        if flows:
            self._keep_flows(list(map(events.__getitem__, flows)), [first + k for k in flows])
        for k in np.flatnonzero(code == 3).tolist():
            self._other(_as_dict(events[k], self.where, first + k), phases[k], first + k)
        if len(x_idx):
            self._add_complete(list(map(events.__getitem__, x_idx.tolist())), first + x_idx)

    def _keep_flows(self, flows: list[_Event], ordinals: list[int]) -> None:
        """Keep flow events for the end, except ``ac2g`` arrows once kernels carry
        correlation ids (they would only repeat them)."""
        if self.correlated:
            cats = list(map(_CAT, flows))
            if cats.count("ac2g") == len(cats):
                return
            self.flow_events += [(e, k) for e, k, c in zip(flows, ordinals, cats) if c != "ac2g"]
            return
        self.flow_events += zip(flows, ordinals)

    def _add_complete(self, xs: list[_Event], ordinals: np.ndarray) -> None:
        b = self.b
        n = len(xs)
        ts = self._exact_times(xs, ordinals)
        dur = np.fromiter(map(_DUR, xs), np.float64, n)
        if (dur < 0).any():
            k = int(np.flatnonzero(dur < 0)[0])
            raise self._err(f"negative duration {dur[k]:g} us (event {xs[k].name!r})", ordinals[k])
        if not np.isfinite(dur).all():
            k = int(np.flatnonzero(~np.isfinite(dur))[0])
            raise self._err("duration is not finite", ordinals[k])
        names = b.strings.intern_many(list(map(_NAME, xs)))
        cats = b.strings.intern_many(list(map(_CAT, xs)))
        tracks = self._tracks(list(map(_PID, xs)), list(map(_TID, xs)), ordinals[0])
        raws = list(map(_ARGS, xs))  # views into the batch's text (msgspec.Raw), not copies
        lengths = np.fromiter(map(len, raws), np.int64, n)
        listed = raws if lengths.all() else [r if size else b"{}" for r, size in zip(raws, lengths.tolist())]
        try:
            lite = _ARGS_DECODER.decode(b"[" + b",".join(listed) + b"]")
        except (msgspec.ValidationError, msgspec.DecodeError) as exc:
            at = re.search(r"\$\[(\d+)\]", str(exc))
            k = int(at.group(1)) if at else 0
            raise self._err(f"bad 'args': {str(exc).split(' - at ')[0]}", ordinals[k]) from None
        corr = np.fromiter(map(_CORR, lite), np.int64, n)
        kinds = self._kinds(cats)
        if not self.correlated and ((kinds == Kind.KERNEL) & (corr >= 0)).any():
            # Kernels carry correlation ids: ac2g flows would only repeat them.
            self.correlated = True
            self.flow_events = [f for f in self.flow_events if f[0].cat != "ac2g"]
        ext = np.fromiter(map(_EXT, lite), np.int64, n)
        op = names
        op_types = list(map(_OP_TYPE, lite))
        if op_types.count(None) != n:
            op = names.copy()
            for k, t in enumerate(op_types):
                if t is not None:
                    op[k] = b.strings.intern(t)
        b.add_columns(
            {
                "name": names,
                "cat": cats,
                "op": op,
                "kind": kinds,
                "ph": np.full(n, ord("X"), np.uint8),
                "ts": ts,
                # Durations are small: float64 holds any three-decimal value below 2**50 ns
                # (13 days) closely enough that rounding recovers the exact nanoseconds.
                "dur": np.rint(dur * 1000.0).astype(np.int64),
                "track": tracks,
                "corr": corr,
                "ext": ext,
            },
            (b"".join(raws), lengths),
        )

    def _exact_times(self, xs: list[_Event], ordinals: np.ndarray) -> np.ndarray:
        """The events' 'ts' in integer ns, parsed exactly from the JSON text."""
        try:
            return us_texts_to_ns(list(map(_TS, xs)))
        except NotANumber as exc:
            k = exc.args[1]
            if not len(xs[k].ts):
                raise self._err(f"complete event has no 'ts' (event {xs[k].name!r})", ordinals[k]) from None
            raise self._err(f"'ts' is {exc.args[0][:40]}, not a number (event {xs[k].name!r})", ordinals[k]) from None

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
        from ..model.builder import finish_trace

        finish_trace(trace)
        classify_device_work(trace)
        resolve_flows(trace, self.flow_events, self)
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
        from ..model.builder import _DEVICE_PROCESS

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
        stream, where, decode=_EVENTS_DECODER.decode, **({"chunk_size": chunk_size} if chunk_size else {})
    )
    reader = _ChromeReader(where)
    # Millions of short-lived records and no reference cycles: the cycle collector would
    # only rescan them over and over.
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        for batch, first in events.batches():
            reader.add_batch(batch, first)
        return reader.finish(events.meta)
    finally:
        if was_enabled:
            gc.enable()
