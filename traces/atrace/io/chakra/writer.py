"""Writing a trace as a Chakra execution trace: its work events as a graph of nodes
(:func:`chakra_dict`, shared by the JSON form and the protobuf form of :mod:`.chakra_et`),
and the JSON form written to a file.
"""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from ...model.kinds import collective
from ...model.links import launch_pairs
from ...model.trace import FLAG_SYNC, WORK_KINDS, EdgeKind, Kind, Trace
from .graph import collective_comm_type

_NODE_TYPE_OF = {
    Kind.HOST_OP: "COMP_NODE",
    Kind.PYTHON: "COMP_NODE",
    Kind.RUNTIME: "COMP_NODE",
    Kind.KERNEL: "COMP_NODE",
    Kind.MEMCPY: "MEM_LOAD_NODE",
    Kind.MEMSET: "MEM_STORE_NODE",
    Kind.COMM: "COMM_COLL_NODE",
}
#: Collective names as runtimes spell them (letters only, lower case) -> Chakra's enum, the
#: longest names first so that "reducescatter" is not taken for "reduce".

def micros(ns: int) -> int:
    """Whole microseconds for Chakra's integer fields: nearest, and never 0 for a
    non-zero duration (the exact nanoseconds travel in ``*_ns`` attributes)."""
    if ns <= 0:
        return 0
    return max(1, (ns + 500) // 1000)


def _attr(name: str, value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"name": name, "bool_val": value}
    if isinstance(value, int):
        return {"name": name, "int64_val": value}
    if isinstance(value, float):
        return {"name": name, "double_val": value}
    if isinstance(value, list) and value and all(isinstance(x, int) and not isinstance(x, bool) for x in value):
        return {"name": name, "int64_list": {"values": value}}
    return {"name": name, "string_val": value if isinstance(value, str) else orjson.dumps(value).decode()}


def chakra_dict(trace: Trace) -> dict[str, Any]:
    """The trace's work events as a Chakra ET graph (JSON-ready dict)."""
    sel = np.flatnonzero(trace.kind_mask(*WORK_KINDS, Kind.ANNOTATION) & trace.is_slice)
    node_id = np.full(len(trace), -1, np.int64)
    node_id[sel] = np.arange(len(sel))
    data, ctrl = _dependencies(trace, sel, node_id)
    nodes = [_node_dict(trace, e, int(node_id[e]), data.get(e, []), ctrl.get(e, [])) for e in sel.tolist()]
    return {
        "schema": "chakra-et-json",
        "global_metadata": {"version": "0.0.4", "attr": [_attr("source", trace.meta.get("source", ""))]},
        "nodes": nodes,
    }


def _dependencies(trace: Trace, sel: np.ndarray, node_id: np.ndarray) -> tuple[dict, dict]:
    """(data, ctrl): event -> node ids it depends on. Data: explicit data edges, launches and
    same-track order of top-level slices; ctrl: the nesting parent and explicit control edges."""
    parent, _ = trace.nesting()
    data: dict[int, list[int]] = {}
    ctrl: dict[int, list[int]] = {}
    top = sel[(parent[sel] < 0) | (node_id[np.maximum(parent[sel], 0)] < 0)]
    top = top[np.lexsort((trace.ts[top], trace.track[top]))]
    ordered = np.array([t.ordered for t in trace.tracks], bool)
    same = (trace.track[top][1:] == trace.track[top][:-1]) & ordered[trace.track[top][1:]]
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
    return data, ctrl


def _node_dict(trace: Trace, e: int, nid: int, data: list[int], ctrl: list[int]) -> dict[str, Any]:
    kind = Kind(int(trace.kind[e]))
    args = trace.args.get(e)
    name = trace.strings.strings[trace.name[e]]
    node_type, comm = _comm_node(name, args) if kind == Kind.COMM else (_NODE_TYPE_OF.get(kind, "COMP_NODE"), [])
    ctrl = list(dict.fromkeys(ctrl))  # the parent link first: readers take it as the parent
    return {
        "id": nid,
        "name": name,
        "type": node_type,
        "ctrl_deps": ctrl,
        "data_deps": sorted(set(data) - set(ctrl)),
        "start_time_micros": micros(int(trace.ts[e])),
        "duration_micros": micros(int(trace.dur[e])),
        "attr": _node_attrs(trace, e, kind, args) + comm,
    }


def _node_attrs(trace: Trace, e: int, kind: Kind, args: dict[str, Any]) -> list[dict[str, Any]]:
    strings = trace.strings.strings
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
    if not tr.ordered:
        attrs.append(_attr("unordered", True))
    if trace.corr[e] >= 0:
        attrs.append(_attr("correlation", int(trace.corr[e])))
    if trace.flags[e] & FLAG_SYNC:
        attrs.append(_attr("sync", True))
    for key in ("comm_src", "comm_dst", "comm_tag", "op_schema", "input_shapes", "input_types",
                "output_shapes", "output_types"):
        if key in args:
            attrs.append(_attr(key, args[key]))
    return attrs


def _comm_node(name: str, args: dict[str, Any]) -> tuple[str, list[dict[str, Any]]]:
    """Node type and attributes of communication: ``COMM_COLL_NODE`` with ``comm_type``
    (Chakra's enum) and ``comm_size`` (bytes, when known); ``COMM_SEND_NODE`` /
    ``COMM_RECV_NODE`` for point-to-point; ``COMP_NODE`` when the collective is unknown (a
    collective node without its type would read as an all-reduce)."""
    info = collective(name, args) or {}
    comm_type = collective_comm_type(args.get("comm_type"))
    if comm_type is None:
        comm_type = collective_comm_type(info.get("collective") or name)
    size = args.get("comm_size")
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        size = info.get("bytes")
    attrs = [] if size is None else [_attr("comm_size", size)]
    if info.get("group") is not None:
        attrs.append(_attr("pg_name", info["group"]))
    if info.get("collective") in ("send", "recv"):
        return f"COMM_{info['collective'].upper()}_NODE", attrs
    if comm_type is None:
        return "COMP_NODE", attrs
    return "COMM_COLL_NODE", [_attr("comm_type", comm_type), *attrs]


def write_bytes(data: bytes, target) -> None:
    """Write ``data`` to a path (``.gz`` compresses) or a binary file."""
    if isinstance(target, str | Path):
        path = Path(target)
        if path.suffix == ".gz":
            with gzip.open(path, "wb", compresslevel=4) as f:
                f.write(data)
        else:
            path.write_bytes(data)
    else:
        target.write(data)


def write_chakra_json(trace: Trace, target) -> None:
    """Write the trace as Chakra ET JSON to a path (``.gz`` compresses) or a binary file
    (:func:`.chakra_et.write_chakra` picks this or the protobuf form by the path's name)."""
    write_bytes(orjson.dumps(chakra_dict(trace)), target)
