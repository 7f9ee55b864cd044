"""Linking a PyTorch host execution trace to the Kineto trace recorded with it.

A host execution trace (``torch.profiler.ExecutionTraceObserver``) lists every operator a
run executed with its schema, its tensors (ids, shapes, types) and its parent, but no
times; the Kineto trace of the same run has the times, the runtime calls and the device
work. Both number each operator by its record-function id: the host ET as ``rf_id``, Kineto
as ``Record function id`` (recent PyTorch) or ``External id`` (older PyTorch, where the two
coincide). :func:`link_host_et` matches them by that id and by name, as Chakra's trace
linker does, and returns the Kineto trace with each matched operator's ET facts in its args
(``et_id``, ``op_schema``, ``input_shapes``/``input_types``/``output_shapes``/
``output_types``), ready to analyse or to write as Chakra (the shapes and types go to each
node's ``inputs``/``outputs``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import orjson

from ..errors import TraceFormatError
from ..model.trace import NO_ID, ArgStore, Kind, Trace
from .opening import open_trace_stream
from .reader import read_trace

_HOST_KINDS = (Kind.HOST_OP, Kind.ANNOTATION)
_IO_KEYS = {
    "input_shapes": ("input_shapes", "inputs", "shapes"),
    "input_types": ("input_types", "inputs", "types"),
    "output_shapes": ("output_shapes", "outputs", "shapes"),
    "output_types": ("output_types", "outputs", "types"),
}


def read_host_et(source) -> dict[int, dict[str, Any]]:
    """The host ET's operator nodes by record-function id (the roots, id 0, are left out)."""
    stream, where, closers = open_trace_stream(source)
    try:
        data = stream.read()
    finally:
        for c in reversed(closers):
            c.close()
    try:
        doc = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise TraceFormatError(f"malformed JSON ({exc.msg})", f"{where}, byte {exc.pos}") from None
    nodes = doc.get("nodes") if isinstance(doc, dict) else None
    if not isinstance(nodes, list):
        raise TraceFormatError("a host execution trace needs a 'nodes' list", where)
    by_rf: dict[int, dict[str, Any]] = {}
    for k, node in enumerate(nodes):
        rf = _rf_id(node)
        if rf is None:
            raise TraceFormatError("node has no integer 'rf_id'", f"{where}, nodes[{k}]")
        if rf > 0:
            by_rf[rf] = node
    return by_rf


def _rf_id(node: Any) -> int | None:
    if not isinstance(node, dict):
        return None
    rf = node.get("rf_id")
    if rf is None:  # schema 1.0.3 on: an attribute
        rf = next((a.get("value") for a in node.get("attrs") or [] if isinstance(a, dict) and a.get("name") == "rf_id"), None)
    return rf if isinstance(rf, int) and not isinstance(rf, bool) else None


def _et_args(node: dict[str, Any]) -> dict[str, Any]:
    """What the ET adds to a Kineto operator: its ET id, schema, and tensor shapes and types."""
    out: dict[str, Any] = {"et_id": node.get("id")}
    if node.get("op_schema"):
        out["op_schema"] = str(node["op_schema"])
    for key, (flat, nested, field) in _IO_KEYS.items():
        value = node.get(flat)
        if value is None and isinstance(node.get(nested), dict):
            value = node[nested].get(field)
        if value not in (None, [], ""):
            out[key] = value if isinstance(value, str) else orjson.dumps(value).decode()
    return out


def link_host_et(host_et, kineto) -> Trace:
    """The Kineto trace with each host operator linked to its host-ET node (see module doc)."""
    by_rf = read_host_et(host_et)
    trace = read_trace(kineto)
    names = trace.strings.strings
    host = np.flatnonzero(np.isin(trace.kind, [int(k) for k in _HOST_KINDS]) & ~trace.on_device)
    args = [trace.args.get(e) for e in range(len(trace))]
    linked = 0
    for e in host.tolist():
        rf = args[e].get("Record function id", int(trace.ext[e]) if trace.ext[e] != NO_ID else None)
        node = by_rf.get(rf) if isinstance(rf, int) else None
        if node is not None and node.get("name") == names[trace.name[e]]:
            args[e].update(_et_args(node))
            linked += 1
    if not linked:
        raise TraceFormatError(
            "no operator of the host execution trace matches one of the Kineto trace by "
            "record-function id and name: are they from the same run?", str(host_et))
    trace.args = ArgStore.from_dicts(args)
    trace.meta["host_et"] = {"nodes": len(by_rf), "linked": linked, "unlinked": len(by_rf) - linked}
    return trace
