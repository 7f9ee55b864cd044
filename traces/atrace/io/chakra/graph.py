"""Chakra execution traces (MLCommons Chakra ET schema, ``et_def.proto``): the graph model
shared by the JSON form (:mod:`.chakra_json`) and the protobuf form (:mod:`.chakra_et`), and
how a graph of nodes becomes a trace.

A Chakra trace is a graph: nodes with an id, name, type (COMP_NODE, COMM_COLL_NODE,
MEM_LOAD_NODE ...), ``data_deps`` and ``ctrl_deps``, ``duration_micros``, optionally
``start_time_micros``, and typed attributes (``attr``: ``is_cpu_op``, ``comm_type``,
``comm_size`` ...).

How the graph is read:

* ``ctrl_deps`` are parent links, as Chakra's PyTorch converter writes them: a node runs
  inside its parent, so it starts no earlier than its parent starts (not after it ends).
* ``data_deps`` are finish-to-start dependencies, except between a node and one of its own
  ancestors or descendants through parent links: converters record those (a parent that
  consumes its child's output, a child that reads its parent's input), and they mean
  containment, not order. They are dropped, and counted.
* Dependencies on nodes that are not in the file (real converter output names the process
  and thread roots it left out) and a node's dependencies on itself are dropped, counted
  in ``trace.meta["chakra"]`` and reported in ``trace.meta["warnings"]``.
* Without start times every node is scheduled as soon as its dependencies allow (the trace
  then shows the graph's ideal timing), on lanes that carry no ordering.

Writing goes the other way (:mod:`.chakra_writer`).
"""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from operator import attrgetter
from typing import Any

import numpy as np
import orjson

from ...errors import EmptyTraceError, TraceFormatError, TraceGraphError
from ...model.builder import TraceBuilder
from ...model.kinds import device_kind
from ...model.trace import EdgeKind, Kind, Trace

NODE_TYPES = [
    "INVALID_NODE",
    "METADATA_NODE",
    "MEM_LOAD_NODE",
    "MEM_STORE_NODE",
    "COMP_NODE",
    "COMM_SEND_NODE",
    "COMM_RECV_NODE",
    "COMM_COLL_NODE",
]
COLLECTIVES = [
    "ALL_REDUCE", "REDUCE", "ALL_GATHER", "GATHER", "SCATTER", "BROADCAST", "ALL_TO_ALL",
    "REDUCE_SCATTER", "REDUCE_SCATTER_BLOCK", "BARRIER",
]
DEVICE_KINDS = (Kind.KERNEL, Kind.MEMCPY, Kind.MEMSET, Kind.COMM)
_NOT_LETTER = re.compile(r"[^a-z]")
_TRACK_ATTRS = ("pid", "tid", "process_name", "thread_name", "unordered")


@dataclass(slots=True)
class ChakraNode:
    """One node, as read from either form; times in integer nanoseconds."""

    id: int
    name: str
    type: str
    data: list[int]
    ctrl: list[int]
    dur: int
    start: int | None
    attrs: dict[str, Any]
    where: str


@dataclass
class GraphReport:
    """What reading the graph dropped or reinterpreted, for ``meta`` and warnings."""

    missing_nodes: set[int] = field(default_factory=set)
    dangling_deps: int = 0
    self_deps: int = 0
    containment_deps: int = 0
    dropped_parents: int = 0

    def to_meta(self) -> dict[str, int]:
        return {
            "missing_nodes": len(self.missing_nodes),
            "dangling_deps": self.dangling_deps,
            "self_deps": self.self_deps,
            "containment_deps": self.containment_deps,
            "dropped_parents": self.dropped_parents,
        }

    def warnings(self) -> list[str]:
        out = []
        if self.dangling_deps:
            some = ", ".join(str(i) for i in sorted(self.missing_nodes)[:5])
            out.append(
                f"chakra: dropped {self.dangling_deps} dependencies on {len(self.missing_nodes)} "
                f"nodes absent from the file (e.g. {some})"
            )
        if self.self_deps:
            out.append(f"chakra: dropped {self.self_deps} dependencies of nodes on themselves")
        if self.dropped_parents:
            out.append(
                f"chakra: ignored {self.dropped_parents} parent links (ctrl_deps) that put a CPU "
                "operator inside device work or closed a loop of parents"
            )
        if self.containment_deps:
            out.append(
                f"chakra: read {self.containment_deps} data dependencies between a node and its "
                "own ancestor or descendant as containment, not order"
            )
        return out



# -- node fields, whichever form they came in ---------------------------------------------
#: Times and ids must fit the trace's int64 columns; 2**62 ns is 146 years.
MAX_NS = 2**62


def checked_int(value: Any, what: str, at: str, lo: int = -(2**63), hi: int = 2**64 - 1) -> int:
    """``value`` as an int in [lo, hi] (an int, or a string of one), or a TraceFormatError."""
    try:
        number = int(value) if isinstance(value, int | str) and not isinstance(value, bool) else None
    except ValueError:
        number = None
    if number is None or not lo <= number <= hi:
        raise TraceFormatError(f"{what} {value!r} is not an integer in [{lo}, {hi}]", at or None)
    return number


def _micros_to_ns(value: Any, what: str, at: str) -> int:
    """Exact integer nanoseconds from microseconds given as an int, a float or a string."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise TraceFormatError(f"{what} {value!r} is not a number", at)
    if isinstance(value, int):
        return value * 1000
    try:
        micros = Decimal(value) if isinstance(value, str) else Decimal(repr(value))
        return int((micros * 1000).to_integral_value())
    except (InvalidOperation, ValueError, OverflowError):
        raise TraceFormatError(f"{what} {value!r} is not a number", at) from None


def duration_ns(micros_value: Any, attrs: dict, at: str) -> int:
    """A node's duration: the exact ``duration_ns`` attribute, else its microseconds."""
    dur_ns = attrs.pop("duration_ns", None)
    if dur_ns is None:
        dur_ns = _micros_to_ns(micros_value or attrs.get("dur", 0) or 0, "duration", at)
    dur_ns = checked_int(dur_ns, "duration (ns)", at, -MAX_NS, MAX_NS)
    if dur_ns < 0:
        raise TraceFormatError(f"negative duration {dur_ns} ns", at)
    return dur_ns


def start_ns(micros_value: Any, attrs: dict, at: str) -> int | None:
    """A node's start: the exact ``start_time_ns`` attribute, else its microseconds."""
    start = attrs.pop("start_time_ns", None)
    if start is None and micros_value is not None:
        start = _micros_to_ns(micros_value, "start time", at)
    return None if start is None else checked_int(start, "start time (ns)", at, -MAX_NS, MAX_NS)


# -- reading: the graph, whichever form it came in ---------------------------------------
def chakra_trace(nodes: list[ChakraNode], meta: dict[str, Any], where: str = "trace") -> Trace:
    """Turn parsed nodes into a trace: resolve ids, drop what cannot hold, schedule, build."""
    if not nodes:
        raise EmptyTraceError("the Chakra trace has no nodes", where)
    index = _index_ids(nodes)
    report = GraphReport()
    _drop_unresolvable(nodes, index, report)
    kinds = [_kind(n) for n in nodes]
    parent = _parents(nodes, index, kinds, report)
    _drop_containment(nodes, index, parent, report)
    timed = bool(nodes) and all(n.start is not None for n in nodes) and any(n.start for n in nodes)
    if not timed:
        _schedule(nodes, index, where)
    late = next((n for n in nodes if n.start + n.dur > MAX_NS), None)
    if late is not None:
        raise TraceFormatError(f"node {late.id} ends past {MAX_NS} ns, more than a trace can hold", late.where)
    b = TraceBuilder(source="chakra")
    b.meta["chakra"] = {**meta, **report.to_meta()}
    if report.warnings():
        b.meta["warnings"] = report.warnings()
    events = [_add_event(b, node, kind, timed) for node, kind in zip(nodes, kinds)]
    _add_edges(b, nodes, index, events)
    return b.build()


def _index_ids(nodes: list[ChakraNode]) -> dict[int, int]:
    index: dict[int, int] = {}
    for k, node in enumerate(nodes):
        if node.id in index:
            raise TraceFormatError(f"duplicate node id {node.id}", node.where)
        index[node.id] = k
    return index


def _drop_unresolvable(nodes: list[ChakraNode], index: dict[int, int], report: GraphReport) -> None:
    """Drop dependencies on absent nodes and on the node itself, counting them."""
    for node in nodes:
        for deps in (node.data, node.ctrl):
            if all(d in index and d != node.id for d in deps):
                continue
            kept = []
            for d in deps:
                if d == node.id:
                    report.self_deps += 1
                elif d not in index:
                    report.dangling_deps += 1
                    report.missing_nodes.add(d)
                else:
                    kept.append(d)
            deps[:] = kept


def _parents(
    nodes: list[ChakraNode], index: dict[int, int], kinds: list[Kind], report: GraphReport
) -> list[int]:
    """Position of each node's parent (its first control dependency), -1 for none.

    Parent links that cannot hold are dropped from ``ctrl`` and counted: a CPU operator
    inside device work, and the link that closes a loop of parents (converters that remap
    ids produce both)."""
    on_device = [k in DEVICE_KINDS for k in kinds]
    parent = [index[n.ctrl[0]] if n.ctrl else -1 for n in nodes]
    for k, p in enumerate(parent):
        if p >= 0 and on_device[p] and not on_device[k]:
            _drop_parent(nodes, parent, k, report)
    state = [0] * len(nodes)  # 0 unseen, 1 on the current walk, 2 done
    for k in range(len(nodes)):
        walk = []
        j = k
        while j >= 0 and state[j] == 0:
            state[j] = 1
            walk.append(j)
            j = parent[j]
        if j >= 0 and state[j] == 1:  # the walk came back to itself: a loop of parents
            _drop_parent(nodes, parent, walk[-1], report)
        for j in walk:
            state[j] = 2
    return parent


def _drop_parent(nodes: list[ChakraNode], parent: list[int], k: int, report: GraphReport) -> None:
    nodes[k].ctrl.pop(0)
    parent[k] = -1
    report.dropped_parents += 1


def _depths(parent: list[int]) -> list[int]:
    """Depth of each node in the (loop-free) parent forest."""
    depth = [-1] * len(parent)
    for k in range(len(parent)):
        walk = []
        j = k
        while j >= 0 and depth[j] < 0:
            walk.append(j)
            j = parent[j]
        d = depth[j] if j >= 0 else -1
        for j in reversed(walk):
            d += 1
            depth[j] = d
    return depth


def _related(a: int, b: int, parent: list[int], depth: list[int]) -> bool:
    """Whether one of nodes ``a`` and ``b`` is an ancestor of the other."""
    if depth[a] > depth[b]:
        a, b = b, a
    for _ in range(depth[b] - depth[a]):
        b = parent[b]
    return a == b


def _drop_containment(
    nodes: list[ChakraNode], index: dict[int, int], parent: list[int], report: GraphReport
) -> None:
    """Data deps between a node and its own ancestor or descendant mean containment."""
    depth = _depths(parent)
    for k, node in enumerate(nodes):
        if not node.data:
            continue
        kept = [d for d in node.data if not _related(index[d], k, parent, depth)]
        report.containment_deps += len(node.data) - len(kept)
        node.data = kept


def _schedule(nodes: list[ChakraNode], index: dict[int, int], where: str) -> None:
    """As-soon-as-possible start times (Kahn order): data deps finish-to-start, parent
    links start-to-start."""
    n = len(nodes)
    indeg = [0] * n
    users: list[list[tuple[int, bool]]] = [[] for _ in range(n)]
    for k, node in enumerate(nodes):
        for dep in set(node.data):
            users[index[dep]].append((k, True))
            indeg[k] += 1
        for dep in set(node.ctrl) - set(node.data):
            users[index[dep]].append((k, False))
            indeg[k] += 1
    ready = deque(k for k in range(n) if indeg[k] == 0)
    start = [0] * n
    done = 0
    while ready:
        k = ready.popleft()
        done += 1
        nodes[k].start = start[k]
        for u, after_finish in users[k]:
            start[u] = max(start[u], start[k] + nodes[k].dur if after_finish else start[k])
            indeg[u] -= 1
            if indeg[u] == 0:
                ready.append(u)
    if done != n:
        stuck = next(nodes[k].id for k in range(n) if indeg[k] > 0)
        raise TraceGraphError(f"the dependencies form a cycle (through node {stuck})", where)


_CATEGORY = {
    Kind.HOST_OP: "cpu_op",
    Kind.PYTHON: "python_function",
    Kind.RUNTIME: "cuda_runtime",
    Kind.KERNEL: "kernel",
    Kind.MEMCPY: "gpu_memcpy",
    Kind.MEMSET: "gpu_memset",
    Kind.COMM: "comm",
    Kind.ANNOTATION: "user_annotation",
    Kind.INSTANT: "instant",
    Kind.COUNTER: "counter",
    Kind.SYNC: "cuda_sync",
}


def _collective_args(attrs: dict[str, Any]) -> dict[str, Any]:
    """A Chakra collective's facts under the arg names PyTorch writes, so that the
    communication analysis (:func:`traces.atrace.model.kinds.collective`) reads them as it reads Kineto's:
    ``Collective name``, and the size as ``In msg nelems`` of dtype ``Byte``."""
    out: dict[str, Any] = {}
    comm_type = collective_comm_type(attrs.get("comm_type"))
    if comm_type is not None:
        out["Collective name"] = COLLECTIVES[comm_type].lower()
    size = attrs.get("comm_size")
    if isinstance(size, int) and not isinstance(size, bool) and size >= 0:
        out.update({"In msg nelems": size, "dtype": "Byte"})
    if attrs.get("pg_name") is not None:
        out["Process Group Name"] = str(attrs["pg_name"])
    return out


def _add_event(b: TraceBuilder, node: ChakraNode, kind: Kind, timed: bool) -> int:
    attrs = node.attrs
    args = {k: v for k, v in attrs.items() if k not in _TRACK_ATTRS}
    args["node_id"] = node.id
    args["node_type"] = node.type
    if kind == Kind.COMM:
        args.update(_collective_args(attrs))
    return b.add(
        node.name,
        node.start,
        node.dur,
        _track(b, node, kind, timed),
        kind=kind,
        cat=str(attrs.get("category", _CATEGORY.get(kind, ""))),
        op=str(attrs["op_type"]) if attrs.get("op_type") else None,
        corr=checked_int(attrs.get("correlation", -1), "correlation", node.where, -1, 2**63 - 1),
        args=args,
    )


def _kind(node: ChakraNode) -> Kind:
    attrs = node.attrs
    if "kind" in attrs and str(attrs["kind"]).upper() in Kind.__members__:
        return Kind[str(attrs["kind"]).upper()]
    is_cpu_op = attrs.get("is_cpu_op")
    if node.type.startswith("COMM"):  # a collective is device work unless marked a CPU op
        return Kind.HOST_OP if is_cpu_op in (True, 1, "true") else Kind.COMM
    if node.type.startswith("MEM"):
        return Kind.MEMCPY
    if is_cpu_op in (False, 0, "false"):  # device work: computation, communication or memory
        return Kind(device_kind(Kind.KERNEL, node.name))
    return Kind.HOST_OP


def _track(b: TraceBuilder, node: ChakraNode, kind: Kind, timed: bool) -> int:
    attrs = node.attrs
    on_device = kind in DEVICE_KINDS
    if timed and ("tid" in attrs or "stream" in attrs):
        pid = _key(attrs.get("pid", "device" if on_device else "host"))
        tid = _key(attrs.get("stream" if on_device else "tid", attrs.get("tid", 0)))
        return b.track(pid, tid, process_name=str(attrs.get("process_name", pid)),
                       thread_name=str(attrs.get("thread_name", "")),
                       ordered=not attrs.get("unordered", False))
    lane = {Kind.COMM: "comm", Kind.MEMCPY: "memory", Kind.MEMSET: "memory"}.get(
        kind, "device" if on_device else "host")
    thread = attrs.get("stream" if on_device else "tid", attrs.get("tid"))
    if thread is not None:
        lane = f"{lane} {_key(thread)}"
    return b.track("chakra", lane, process_name="chakra", thread_name=lane, ordered=False)


def _key(value: Any) -> int | str:
    """A track's pid or tid: an int or a string as given, anything else as its JSON."""
    if isinstance(value, int | str) and not isinstance(value, bool):
        return value
    return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode()


def _add_edges(b: TraceBuilder, nodes: list[ChakraNode], index: dict[int, int], events: list[int]) -> None:
    for kind, deps_of in ((EdgeKind.DATA, attrgetter("data")), (EdgeKind.CONTROL, attrgetter("ctrl"))):
        src = [events[index[d]] for node in nodes for d in deps_of(node)]
        dst = [e for node, e in zip(nodes, events) for _ in deps_of(node)]
        if src:
            b.add_edges(np.array(src, np.int64), np.array(dst, np.int64), kind)


_COLLECTIVE_WORDS = [
    ("reducescatterblock", "REDUCE_SCATTER_BLOCK"),
    ("reducescatter", "REDUCE_SCATTER"),
    ("allreduce", "ALL_REDUCE"),
    ("allgather", "ALL_GATHER"),
    ("alltoall", "ALL_TO_ALL"),
    ("broadcast", "BROADCAST"),
    ("barrier", "BARRIER"),
    ("scatter", "SCATTER"),
    ("gather", "GATHER"),
    ("reduce", "REDUCE"),
]


def collective_comm_type(text: Any) -> int | None:
    """Chakra's ``CollectiveCommType`` value for a collective's name or enum value, if any."""
    if isinstance(text, int) and not isinstance(text, bool):
        return text if 0 <= text < len(COLLECTIVES) else None
    if not isinstance(text, str):
        return None
    if text.upper() in COLLECTIVES:
        return COLLECTIVES.index(text.upper())
    letters = _NOT_LETTER.sub("", text.lower())
    for word, name in _COLLECTIVE_WORDS:
        if word in letters:
            return COLLECTIVES.index(name)
    return None
