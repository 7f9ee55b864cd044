"""Chakra execution traces in JSON form (MLCommons Chakra ET schema, ``et_def.proto``).

A Chakra trace is a graph: nodes with an id, name, type (COMP_NODE, COMM_COLL_NODE,
MEM_LOAD_NODE ...), ``data_deps`` and ``ctrl_deps`` (ids of nodes that must finish first),
``duration_micros``, optionally ``start_time_micros``, and typed attributes (``attr``:
``is_cpu_op``, ``comm_type``, ``comm_size`` ...). Both the proto field names
(``data_deps``) and protobuf's JSON names (``dataDeps``) are accepted.

Without start times the reader schedules every node as soon as its dependencies finish
(the trace then shows the graph's ideal timing), on lanes that never overlap.
"""

from __future__ import annotations

import re
from collections import deque
from typing import Any, BinaryIO

import numpy as np
import orjson

from .builder import TraceBuilder
from .errors import TraceFormatError, TraceGraphError
from .model import FLAG_SYNC, WORK_KINDS, EdgeKind, Kind, Trace

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
_CAMEL = re.compile(r"(?<!^)(?=[A-Z])")


def _snake(key: str) -> str:
    return _CAMEL.sub("_", key).lower()


def _attr_value(attr: dict) -> Any:
    for k, v in attr.items():
        k = _snake(k)
        if k in ("name", "doc_string"):
            continue
        if k.endswith("_list") and isinstance(v, dict):
            return v.get("values", [])
        if k.endswith("_val") or k == "value":
            if k.startswith(("int", "uint", "sint", "fixed", "sfixed")) and isinstance(v, str):
                return int(v)  # protobuf JSON writes 64-bit integers as strings
            return v
    return None


def _node_type(value: Any, where: str) -> str:
    if isinstance(value, int) and 0 <= value < len(NODE_TYPES):
        return NODE_TYPES[value]
    if isinstance(value, str) and value in NODE_TYPES:
        return value
    if value is None:
        return "COMP_NODE"
    raise TraceFormatError(f"unknown node type {value!r}", where)


def _int_list(value: Any, what: str, where: str) -> list[int]:
    if value is None:
        return []
    if isinstance(value, int):
        return [value]
    if not isinstance(value, list) or not all(isinstance(x, int | str) for x in value):
        raise TraceFormatError(f"'{what}' must be a list of node ids", where)
    try:
        return [int(x) for x in value]
    except ValueError:
        raise TraceFormatError(f"'{what}' must be a list of node ids", where) from None


def read_chakra(stream: BinaryIO, where: str = "trace") -> Trace:
    """Read a Chakra ET JSON document (the whole document is parsed at once)."""
    data = stream.read()
    try:
        doc = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise TraceFormatError(f"malformed JSON ({exc.msg})", f"{where}, byte {exc.pos}") from None
    if isinstance(doc, list):
        doc = {"nodes": doc}
    if not isinstance(doc, dict) or not isinstance(doc.get("nodes"), list):
        raise TraceFormatError("a Chakra trace needs a 'nodes' list", where)
    return chakra_from_dict(doc, where)


def chakra_from_dict(doc: dict, where: str = "trace") -> Trace:
    raw_nodes = doc["nodes"]
    nodes = []
    ids: dict[int, int] = {}
    for k, raw in enumerate(raw_nodes):
        at = f"{where}, nodes[{k}]"
        if not isinstance(raw, dict):
            raise TraceFormatError("a node must be an object", at)
        n = {_snake(key): v for key, v in raw.items()}
        if "id" not in n:
            raise TraceFormatError("node has no 'id'", at)
        try:
            nid = int(n["id"])
        except (TypeError, ValueError):
            raise TraceFormatError(f"node id {n['id']!r} is not an integer", at) from None
        if nid in ids:
            raise TraceFormatError(f"duplicate node id {nid}", at)
        attrs = {}
        for a in n.get("attr") or n.get("attrs") or []:
            if isinstance(a, dict) and "name" in a:
                attrs[str(a["name"])] = _attr_value(a)
        dur_ns = attrs.pop("duration_ns", None)
        if dur_ns is None:
            dur = n.get("duration_micros", attrs.get("dur", 0)) or 0
            if not isinstance(dur, int | float | str):
                raise TraceFormatError(f"duration {dur!r} is not a number", at)
            dur_ns = round(float(dur) * 1000)
        start_ns = attrs.pop("start_time_ns", None)
        if start_ns is None and n.get("start_time_micros") is not None:
            start_ns = round(float(n["start_time_micros"]) * 1000)
        if int(dur_ns) < 0:
            raise TraceFormatError(f"negative duration {dur_ns} ns", at)
        ctrl = n.get("ctrl_deps")
        if isinstance(ctrl, int) and ctrl < 0:
            ctrl = []  # PyTorch ET: ctrl_deps is the parent id, -1 for none
        node = {
            "id": nid,
            "name": str(n.get("name", "")),
            "type": _node_type(n.get("type"), at),
            "data": _int_list(n.get("data_deps"), "data_deps", at),
            "ctrl": _int_list(ctrl, "ctrl_deps", at),
            "dur": int(dur_ns),
            "start": None if start_ns is None else int(start_ns),
            "attrs": attrs,
            "where": at,
        }
        ids[nid] = len(nodes)
        nodes.append(node)
    for node in nodes:
        for dep in node["data"] + node["ctrl"]:
            if dep not in ids:
                raise TraceFormatError(f"node {node['id']} depends on unknown node {dep}", node["where"])
    timed = bool(nodes) and all(n["start"] is not None for n in nodes)
    if not timed:
        _schedule(nodes, ids)
    b = TraceBuilder(source="chakra")
    b.meta["chakra"] = {k: v for k, v in doc.items() if k != "nodes"}
    index = {}
    for node in nodes:
        attrs = node["attrs"]
        kind, lane = _kind_and_lane(node)
        if timed and ("tid" in attrs or "stream" in attrs):
            dev = kind in (Kind.KERNEL, Kind.MEMCPY, Kind.MEMSET, Kind.COMM)
            pid = attrs.get("pid", "device" if dev else "host")
            tid = attrs.get("stream" if dev else "tid", attrs.get("tid", 0))
            track = b.track(pid, tid, process_name=str(attrs.get("process_name", pid)),
                            thread_name=str(attrs.get("thread_name", "")))
        else:
            track = b.track("chakra", lane, process_name="chakra", thread_name=lane, ordered=False)
        args = {k: v for k, v in attrs.items() if k not in ("pid", "tid", "process_name", "thread_name")}
        args["node_id"] = node["id"]
        args["node_type"] = node["type"]
        index[node["id"]] = b.add(
            node["name"],
            node["start"],
            node["dur"],
            track,
            kind=kind,
            cat=str(attrs.get("category", _CATEGORY[kind])),
            op=str(attrs["op_type"]) if attrs.get("op_type") else None,
            corr=int(attrs.get("correlation", -1)),
            args=args,
        )
    for node in nodes:
        dst = index[node["id"]]
        for dep in node["data"]:
            b.edge(index[dep], dst, EdgeKind.DATA)
        for dep in node["ctrl"]:
            b.edge(index[dep], dst, EdgeKind.CONTROL)
    trace = b.build()
    return trace


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
}


def _kind_and_lane(node: dict) -> tuple[Kind, str]:
    t = node["type"]
    attrs = node["attrs"]
    if "kind" in attrs and str(attrs["kind"]).upper() in Kind.__members__:
        kind = Kind[str(attrs["kind"]).upper()]
        return kind, "device" if kind in (Kind.KERNEL, Kind.MEMCPY, Kind.MEMSET, Kind.COMM) else "host"
    if t.startswith("COMM"):
        return Kind.COMM, "comm"
    if t.startswith("MEM"):
        return Kind.MEMCPY, "memory"
    if attrs.get("is_cpu_op", True) in (False, 0, "false"):
        return Kind.KERNEL, "device"
    return Kind.HOST_OP, "host"


def _schedule(nodes: list[dict], ids: dict[int, int]) -> None:
    """As-soon-as-possible start times from the dependencies (Kahn order)."""
    n = len(nodes)
    indeg = [0] * n
    users: list[list[int]] = [[] for _ in range(n)]
    for k, node in enumerate(nodes):
        for dep in set(node["data"] + node["ctrl"]):
            users[ids[dep]].append(k)
            indeg[k] += 1
    ready = deque(k for k in range(n) if indeg[k] == 0)
    start = [0] * n
    done = 0
    while ready:
        k = ready.popleft()
        done += 1
        node = nodes[k]
        node["start"] = start[k]
        finish = start[k] + node["dur"]
        for u in users[k]:
            start[u] = max(start[u], finish)
            indeg[u] -= 1
            if indeg[u] == 0:
                ready.append(u)
    if done != n:
        stuck = next(nodes[k]["id"] for k in range(n) if indeg[k] > 0)
        raise TraceGraphError(f"the dependencies form a cycle (through node {stuck})", "chakra nodes")


_NODE_TYPE_OF = {
    Kind.HOST_OP: "COMP_NODE",
    Kind.PYTHON: "COMP_NODE",
    Kind.RUNTIME: "COMP_NODE",
    Kind.KERNEL: "COMP_NODE",
    Kind.MEMCPY: "MEM_LOAD_NODE",
    Kind.MEMSET: "MEM_STORE_NODE",
    Kind.COMM: "COMM_COLL_NODE",
}


def _attr(name: str, value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"name": name, "bool_val": value}
    if isinstance(value, int):
        return {"name": name, "int64_val": value}
    if isinstance(value, float):
        return {"name": name, "double_val": value}
    if isinstance(value, list) and all(isinstance(x, int) for x in value):
        return {"name": name, "int64_list": {"values": value}}
    return {"name": name, "string_val": value if isinstance(value, str) else orjson.dumps(value).decode()}


def chakra_dict(trace: Trace) -> dict[str, Any]:
    """The trace's work events as a Chakra ET graph (JSON-ready dict)."""
    from .correlate import launch_pairs

    sel = np.flatnonzero(trace.kind_mask(*WORK_KINDS, Kind.ANNOTATION) & trace.is_slice)
    node_id = np.full(len(trace), -1, np.int64)
    node_id[sel] = np.arange(len(sel))
    parent, _ = trace.nesting()
    data: dict[int, list[int]] = {}
    ctrl: dict[int, list[int]] = {}
    # Same-track order: each top-level slice after the previous one.
    top = sel[(parent[sel] < 0) | (node_id[np.maximum(parent[sel], 0)] < 0)]
    top = top[np.lexsort((trace.ts[top], trace.track[top]))]
    same = trace.track[top][1:] == trace.track[top][:-1]
    for a, z in zip(top[:-1][same].tolist(), top[1:][same].tolist()):
        data.setdefault(z, []).append(int(node_id[a]))
    for e in sel.tolist():
        p = int(parent[e])
        if p >= 0 and node_id[p] >= 0:
            ctrl.setdefault(e, []).append(int(node_id[p]))
    rt, dev = launch_pairs(trace)
    for a, z in zip(rt.tolist(), dev.tolist()):
        if node_id[a] >= 0 and node_id[z] >= 0:
            data.setdefault(z, []).append(int(node_id[a]))
    for a, z, k in zip(trace.edge_src.tolist(), trace.edge_dst.tolist(), trace.edge_kind.tolist()):
        if node_id[a] >= 0 and node_id[z] >= 0:
            (ctrl if k == EdgeKind.CONTROL else data).setdefault(z, []).append(int(node_id[a]))
    strings = trace.strings.strings
    nodes = []
    for e in sel.tolist():
        kind = Kind(int(trace.kind[e]))
        tr = trace.tracks[int(trace.track[e])]
        on_dev = bool(trace.on_device[e])
        attrs = [
            _attr("is_cpu_op", not on_dev),
            _attr("kind", kind.name.lower()),
            _attr("op_type", strings[trace.op[e]]),
            _attr("category", strings[trace.cat[e]]),
            _attr("start_time_ns", int(trace.ts[e])),
            _attr("duration_ns", int(trace.dur[e])),
            _attr("pid", tr.pid if isinstance(tr.pid, int | str) else str(tr.pid)),
            _attr("stream" if on_dev else "tid", tr.tid if isinstance(tr.tid, int | str) else str(tr.tid)),
            _attr("process_name", tr.process_name),
            _attr("thread_name", tr.thread_name),
        ]
        if trace.corr[e] >= 0:
            attrs.append(_attr("correlation", int(trace.corr[e])))
        if trace.flags[e] & FLAG_SYNC:
            attrs.append(_attr("sync", True))
        args = trace.args.get(e)
        for key in ("comm_type", "comm_size", "comm_src", "comm_dst", "comm_tag"):
            if key in args:
                attrs.append(_attr(key, args[key]))
        nodes.append(
            {
                "id": int(node_id[e]),
                "name": strings[trace.name[e]],
                "type": _NODE_TYPE_OF.get(kind, "COMP_NODE"),
                "ctrl_deps": sorted(set(ctrl.get(e, []))),
                "data_deps": sorted(set(data.get(e, []))),
                "start_time_micros": int(trace.ts[e]) // 1000,
                "duration_micros": int(trace.dur[e]) // 1000,
                "attr": attrs,
            }
        )
    return {
        "schema": "chakra-et-json",
        "global_metadata": {"version": "0.0.4", "attr": [_attr("source", trace.meta.get("source", ""))]},
        "nodes": nodes,
    }


def write_chakra(trace: Trace, target) -> None:
    """Write the trace as Chakra ET JSON to a path (``.gz`` compresses) or a binary file."""
    import gzip
    from pathlib import Path

    data = orjson.dumps(chakra_dict(trace))
    if isinstance(target, str | Path):
        path = Path(target)
        if path.suffix == ".gz":
            with gzip.open(path, "wb", compresslevel=4) as f:
                f.write(data)
        else:
            path.write_bytes(data)
    else:
        target.write(data)
