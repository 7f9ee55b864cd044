"""One batch of Chrome trace events decoded into columns: a pure function of its text.

:func:`parse_batch` takes the JSON text of a run of events (``[{...}, {...}]``) and returns
a :class:`Batch`: the complete (``X``) events as columns, the flow events as columns, and
the few other events (metadata, instants, ``B``/``E`` pairs, counters...) as tuples. It
looks at nothing outside its text, so batches can be decoded in any order, in any process;
:mod:`.reader` then merges them in file order, which is where strings are interned
and tracks numbered (so the trace is the same however the work was split).

Where the event scanner in C is built (:mod:`.native`), it reads the columns in one pass
over the text; it declines whatever it is not sure to read exactly as the msgspec path
below does, and that batch goes to :func:`decode_batch`. There msgspec decodes the events
into typed records that hold only the fields used (``ts`` and ``args`` stay raw JSON text);
the columns are built from those records a field at a time, and names, categories and
thread ids are coded through one dictionary of distinct (name, category, pid, tid) tuples,
a few thousand where there are a million events.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from itertools import count, repeat
from operator import attrgetter

import msgspec
import numpy as np

from ...model.trace import NO_ID, Kind
from . import native
from .timeparse import NotANumber, us_text_to_ns, us_texts_to_ns

#: Kinds of events by category (lower case); others are decided by their track.
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


EVENTS_DECODER = msgspec.json.Decoder(list[_Event])
_ARGS_DECODER = msgspec.json.Decoder(list[_ArgsLite])

_TS, _DUR, _NAME, _ARGS = attrgetter("ts"), attrgetter("dur"), attrgetter("name"), attrgetter("args")
_PH, _ID, _CAT = attrgetter("ph"), attrgetter("id"), attrgetter("cat")
_CORR, _EXT, _OP_TYPE = attrgetter("correlation"), attrgetter("external_id"), attrgetter("op_type")
_X_KEY = attrgetter("name", "cat", "pid", "tid")
_FLOW_KEY = attrgetter("cat", "ph", "bp", "pid", "tid")
_PHASE_CODE = {"X": 0, "s": 1, "f": 1, "t": 1}  # 0: complete, 1: flow, 3: anything else
_PHASE_CODE_OF_BYTE = np.full(256, 3, np.int8)
for _ph, _code in _PHASE_CODE.items():
    _PHASE_CODE_OF_BYTE[ord(_ph)] = _code

#: Durations from here on do not fit int64 nanoseconds (292 years): an error, not a wrap.
MAX_DUR_US = 2.0**63 / 1000.0

# Flow 'ts' states
TS_OK, TS_MISSING, TS_BAD = 0, 1, 2


@dataclass
class Complete:
    """The complete events of a batch, as columns (``X`` in the batch's order).

    ``key`` indexes ``keys``, the distinct (name, category, pid, tid) in order of first
    appearance; ``error`` is the first problem found, in the order the reader checks
    (times, then durations, then args): (message, index among these events).
    """

    local: np.ndarray | None = None  # position of each in the batch (None: all the batch)
    keys: list[tuple] = field(default_factory=list)
    key: np.ndarray | None = None
    ts: np.ndarray | None = None
    dur: np.ndarray | None = None  # ns
    corr: np.ndarray | None = None
    ext: np.ndarray | None = None
    op_types: list[tuple[int, str]] = field(default_factory=list)  # (event, args.op_type)
    args: bytes = b""
    arg_len: np.ndarray | None = None
    error: tuple[str, int] | None = None

    def __len__(self) -> int:
        return len(self.key) if self.key is not None else 0

    def correlated(self) -> bool:
        """Whether a kernel among these carries a correlation id."""
        if self.error is not None or not len(self):
            return False
        kernel = np.array([KIND_BY_CATEGORY.get(cat.lower()) == Kind.KERNEL for _n, cat, *_ in self.keys], bool)
        return bool((kernel[self.key] & (self.corr >= 0)).any())


@dataclass
class Flows:
    """The flow events (``s``, ``t``, ``f``) of a batch, as columns."""

    local: np.ndarray
    keys: list[tuple]  # distinct (cat, ph, bp, pid, tid)
    key: np.ndarray
    ids: list  # the flow id of each (int, str or None)
    ts: np.ndarray  # ns (0 where ts_state is not TS_OK)
    ts_state: np.ndarray

    def without(self, cat: str) -> Flows:
        """These flows but those of category ``cat`` (keys as :func:`_code` gives them)."""
        drop = np.array([key[0] == cat for key in self.keys], bool)
        if not drop.any():
            return self
        keep = np.flatnonzero(~drop[self.key])
        keys, key = _recode(self.keys, self.key[keep])
        ids = list(map(self.ids.__getitem__, keep.tolist()))
        return Flows(self.local[keep], keys, key, ids, self.ts[keep], self.ts_state[keep])


@dataclass
class Batch:
    """A decoded run of events: ``n`` events, of which ``x`` complete, ``flows`` flows, and
    ``others`` as (position, ph, name, cat, ts text, dur, pid, tid, id, bp, args text)."""

    n: int
    x: Complete | None = None
    flows: Flows | None = None
    others: list[tuple] = field(default_factory=list)

    def __len__(self) -> int:
        return self.n


def parse_batch(text) -> Batch:
    """Decode the JSON array ``text`` of events (bytes, or str) into a :class:`Batch`.

    Raises msgspec's DecodeError or ValidationError when the text is not an array of
    event objects with fields of the right types, UnicodeDecodeError where it is not UTF-8
    (the caller says where).
    """
    if native.scan is not None:
        try:
            data = text.encode() if isinstance(text, str) else text
            batch = _scanned(data, native.scan(data))
        except (UnicodeEncodeError, MemoryError):  # a str msgspec words; memory: msgspec tries
            batch = None
        if batch is not None:
            return batch
    return decode_batch(text)


def decode_batch(text) -> Batch:
    """:func:`parse_batch` by msgspec alone (the path for whatever the scanner declines)."""
    events = EVENTS_DECODER.decode(text)
    check_utf8(text)
    n = len(events)
    phases = list(map(_PH, events))
    if phases.count("X") == n:
        return Batch(n, _complete(events, None) if n else None)
    code = phase_codes(phases)
    batch = Batch(n)
    x_idx = np.flatnonzero(code == 0)
    if len(x_idx):
        batch.x = _complete(list(map(events.__getitem__, x_idx.tolist())), x_idx)
    flows = np.flatnonzero(code == 1)
    if len(flows) and batch.x is not None and batch.x.correlated():
        # Kernels here carry correlation ids, so the trace's ac2g flows will go unused.
        cats = list(map(_CAT, map(events.__getitem__, flows.tolist())))
        if "ac2g" in cats:
            flows = flows[np.array(cats, object) != "ac2g"]
    if len(flows):
        batch.flows = _flows(list(map(events.__getitem__, flows.tolist())), flows)
    for k in np.flatnonzero(code == 3).tolist():
        e = events[k]
        batch.others.append((k, e.ph, e.name, e.cat, bytes(e.ts), e.dur, e.pid, e.tid, e.id, e.bp, bytes(e.args)))
    return batch


def check_utf8(text) -> None:
    """Raise UnicodeDecodeError where the text is not UTF-8, in strings msgspec skips too
    (an unknown field's, or the args' that are kept as text and read later): a trace that is
    not UTF-8 is refused at load, as JSON requires, not when its args are first read."""
    if isinstance(text, str) or (isinstance(text, bytes) and text.isascii()):
        return
    str(text, "utf-8")


def _scanned(text, scanned: tuple | None) -> Batch | None:
    """The batch from the C scanner's columns (:mod:`.native`); None where it declined
    or where the batch holds a problem, which :func:`decode_batch` then words."""
    if scanned is None:
        return None
    n, x_cols, flow_cols, others = scanned
    batch = Batch(n)
    local, keys, key, ts, dur, corr, ext, op_types, args, arg_len = x_cols
    if len(key):
        dur = np.frombuffer(dur, np.float64)
        if (dur < 0).any() or not (dur < MAX_DUR_US).all():  # (NaN too) the msgspec path words it
            return None
        local = np.frombuffer(local, np.int64)
        batch.x = Complete(
            local=None if len(local) == n else local,
            keys=keys,
            key=np.frombuffer(key, np.int32),
            ts=np.frombuffer(ts, np.int64),
            dur=np.rint(dur * 1000.0).astype(np.int64),
            corr=np.frombuffer(corr, np.int64),
            ext=np.frombuffer(ext, np.int64),
            op_types=op_types,
            args=bytes(args),
            arg_len=np.frombuffer(arg_len, np.int64),
        )
    local, keys, key, ids, ts, state = flow_cols
    if ids:
        flows = Flows(np.frombuffer(local, np.int64), keys, np.frombuffer(key, np.int32), ids,
                      np.frombuffer(ts, np.int64), np.frombuffer(state, np.uint8))
        if batch.x is not None and batch.x.correlated():
            flows = flows.without("ac2g")  # as decode_batch drops them: unused next to correlation ids
        if flows.ids:
            batch.flows = flows
    view = memoryview(text)
    for k, start, end in others:
        try:
            (e,) = EVENTS_DECODER.decode(b"[" + view[start:end] + b"]")
        except (msgspec.DecodeError, UnicodeDecodeError):  # the batch's decode words it
            return None
        batch.others.append((k, e.ph, e.name, e.cat, bytes(e.ts), e.dur, e.pid, e.tid, e.id, e.bp, bytes(e.args)))
    return batch


def _recode(keys: list, key: np.ndarray) -> tuple[list, np.ndarray]:
    """Only the keys ``key`` uses, in order of first use (as :func:`_code` gives them)."""
    used, first = np.unique(key, return_index=True)
    order = used[np.argsort(first)]
    index = np.zeros(len(keys), np.int32)
    index[order] = np.arange(len(order), dtype=np.int32)
    return list(map(keys.__getitem__, order.tolist())), index[key]


def phase_codes(phases: list) -> np.ndarray:
    """Per event: 0 complete, 1 flow, 3 other. Phases are one-letter strings, so their
    join is one byte each, read at once; anything else (a missing or longer phase) is
    looked up one by one."""
    if None not in phases and "" not in phases:
        text = "".join(phases)  # no empty phase: as many letters as phases means one each
        if len(text) == len(phases) and text.isascii():
            return _PHASE_CODE_OF_BYTE[np.frombuffer(text.encode(), np.uint8)]
    return np.array(list(map(_PHASE_CODE.get, phases, repeat(3))), np.int8)


def _code(values: list) -> tuple[list, np.ndarray]:
    """The distinct values in order of first appearance, and each value's index among them.

    One dictionary look-up per value: each distinct value is stored with the position of
    its first appearance, so the positions, ranked, are the indices.
    """
    first: dict = {}
    at = np.fromiter(map(first.setdefault, values, count()), np.int64, len(values))
    positions = np.fromiter(first.values(), np.int64, len(first))  # increasing
    index = np.empty(len(values), np.int32)
    index[positions] = np.arange(len(positions), dtype=np.int32)
    return list(first), index[at]


def _complete(xs: list[_Event], local: np.ndarray | None) -> Complete:
    out = Complete(local=local)
    n = len(xs)
    try:
        out.ts = us_texts_to_ns(list(map(_TS, xs)))
    except NotANumber as exc:
        k = exc.args[1]
        if not len(xs[k].ts):
            out.error = (f"complete event has no 'ts' (event {xs[k].name!r})", k)
        else:
            out.error = (f"'ts' is {exc.args[0][:40]}, not a number (event {xs[k].name!r})", k)
        return out
    dur = np.fromiter(map(_DUR, xs), np.float64, n)
    if (dur < 0).any():
        k = int(np.flatnonzero(dur < 0)[0])
        out.error = (f"negative duration {dur[k]:g} us (event {xs[k].name!r})", k)
        return out
    if not np.isfinite(dur).all():
        out.error = ("duration is not finite", int(np.flatnonzero(~np.isfinite(dur))[0]))
        return out
    if (dur >= MAX_DUR_US).any():
        k = int(np.flatnonzero(dur >= MAX_DUR_US)[0])
        out.error = (f"duration {dur[k]:g} us is out of range (event {xs[k].name!r})", k)
        return out
    # Durations are small: float64 holds any three-decimal value below 2**50 ns (13 days)
    # closely enough that rounding recovers the exact nanoseconds.
    out.dur = np.rint(dur * 1000.0).astype(np.int64)
    out.keys, out.key = _code(list(map(_X_KEY, xs)))
    raws = list(map(_ARGS, xs))  # views into the batch's text (msgspec.Raw), not copies
    out.arg_len = np.fromiter(map(len, raws), np.int64, n)
    listed = raws if out.arg_len.all() else [r if size else b"{}" for r, size in zip(raws, out.arg_len.tolist())]
    try:
        lite = _ARGS_DECODER.decode(b"[" + b",".join(listed) + b"]")
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        at = re.search(r"\$\[(\d+)\]", str(exc))
        out.error = (f"bad 'args': {str(exc).split(' - at ')[0]}", int(at.group(1)) if at else 0)
        return out
    del listed
    out.corr = np.fromiter(map(_CORR, lite), np.int64, n)
    out.ext = np.fromiter(map(_EXT, lite), np.int64, n)
    op_types = list(map(_OP_TYPE, lite))
    if op_types.count(None) != n:
        out.op_types = [(k, t) for k, t in enumerate(op_types) if t is not None]
    out.args = b"".join(raws)
    return out


def _flows(fl: list[_Event], local: np.ndarray) -> Flows:
    keys, key = _code(list(map(_FLOW_KEY, fl)))
    raws = list(map(_TS, fl))
    n = len(fl)
    state = np.zeros(n, np.uint8)
    try:
        ts = us_texts_to_ns(raws)
    except NotANumber:
        ts = np.zeros(n, np.int64)
        for k, raw in enumerate(raws):
            if not len(raw):
                state[k] = TS_MISSING
                continue
            try:
                ts[k] = us_text_to_ns(raw)
            except (NotANumber, OverflowError):
                state[k] = TS_BAD
    return Flows(local, keys, key, list(map(_ID, fl)), ts, state)
