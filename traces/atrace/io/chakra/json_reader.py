"""Chakra execution traces in their JSON form: nodes as objects, with the proto field names
(``data_deps``) or protobuf's JSON names (``dataDeps``), read into the graph model of
:mod:`.chakra_graph` (the whole document is parsed at once).

A PyTorch *host* execution trace (nodes with ``parent`` and ``rf_id`` but no durations) is
a different format and is refused with a message saying so.
"""

from __future__ import annotations

import re
from typing import Any, BinaryIO

import orjson

from ...errors import TraceFormatError
from ...model.trace import Trace
from .graph import NODE_TYPES, ChakraNode, chakra_trace, checked_int, duration_ns, start_ns

_CAMEL = re.compile(r"(?<!^)(?=[A-Z])")

HOST_ET_MESSAGE = (
    "this is a PyTorch host execution trace (nodes with 'parent' and 'rf_id', no durations), "
    "not a Chakra ET: it records which operators ran and their tensors but not how long they "
    "took. Load the Kineto trace recorded with it instead, or link the two: python -m "
    "traces.atrace convert KINETO OUT.et --host-et HOST_ET"
)


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
    """A trace from a Chakra ET JSON document already parsed into Python objects."""
    raw_nodes = doc["nodes"]
    if is_host_execution_trace(raw_nodes):
        raise TraceFormatError(HOST_ET_MESSAGE, where)
    nodes = [_node_from_json(raw, f"{where}, nodes[{k}]") for k, raw in enumerate(raw_nodes)]
    meta = {k: v for k, v in doc.items() if k != "nodes"}
    return chakra_trace(nodes, meta, where)


def is_host_execution_trace(raw_nodes: list) -> bool:
    """True for PyTorch's host execution trace: a parent id per node (``parent``, or since
    schema 1.0.3 an integer ``ctrl_deps``), record-function ids, and no timing."""
    sample = [n for n in raw_nodes[:50] if isinstance(n, dict)]
    if not sample:
        return False
    timed = any(k in n for n in sample for k in ("duration_micros", "durationMicros", "dur"))
    return not timed and all(_host_et_node(n) for n in sample)


def _host_et_node(n: dict) -> bool:
    has_parent = "parent" in n or isinstance(n.get("ctrl_deps"), int)
    attrs = n.get("attrs")
    names = {a.get("name") for a in attrs if isinstance(a, dict)} if isinstance(attrs, list) else set()
    return has_parent and bool({"rf_id", "op_schema"} & (n.keys() | names))


def _node_from_json(raw: Any, at: str) -> ChakraNode:
    if not isinstance(raw, dict):
        raise TraceFormatError("a node must be an object", at)
    n = {_snake(key): v for key, v in raw.items()}
    attrs = _json_attrs(n.get("attr") or n.get("attrs") or [], at)
    attrs.update(_io_attrs(n.get("inputs"), "input"))
    attrs.update(_io_attrs(n.get("outputs"), "output"))
    ctrl = n.get("ctrl_deps")
    if isinstance(ctrl, int) and ctrl < 0:
        ctrl = []  # PyTorch ET: ctrl_deps is the parent id, -1 for none
    return ChakraNode(
        id=_node_id(n, at),
        name=str(n.get("name", "")),
        type=_node_type(n.get("type"), at),
        data=_int_list(n.get("data_deps"), "data_deps", at),
        ctrl=_int_list(ctrl, "ctrl_deps", at),
        dur=duration_ns(n.get("duration_micros"), attrs, at),
        start=start_ns(n.get("start_time_micros"), attrs, at),
        attrs=attrs,
        where=at,
    )


def _snake(key: str) -> str:
    return _CAMEL.sub("_", key).lower()


def _node_id(n: dict, at: str) -> int:
    if "id" not in n:
        raise TraceFormatError("node has no 'id'", at)
    return checked_int(n["id"], "node id", at)


def _json_attrs(raw_attrs: Any, at: str) -> dict[str, Any]:
    attrs = {}
    for a in raw_attrs if isinstance(raw_attrs, list) else []:
        if isinstance(a, dict) and "name" in a:
            attrs[str(a["name"])] = _attr_value(a, at)
    return attrs


def _attr_value(attr: dict, at: str) -> Any:
    for k, v in attr.items():
        k = _snake(k)
        if k in ("name", "doc_string"):
            continue
        if k.endswith("_list") and isinstance(v, dict):
            return v.get("values", [])
        if k.endswith("_val") or k == "value":
            if k.startswith(("int", "uint", "sint", "fixed", "sfixed")) and isinstance(v, str):
                return checked_int(v, f"attribute {attr['name']!r}", at)  # JSON's 64-bit ints
            return v
    return None


def _io_attrs(info: Any, prefix: str) -> dict[str, str]:
    """Shapes and types of an ``inputs``/``outputs`` IOInfo (values, tensor ids, are dropped)."""
    if not isinstance(info, dict):
        return {}
    return {f"{prefix}_{k}": str(info[k]) for k in ("shapes", "types") if info.get(k)}


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
    return [checked_int(x, f"'{what}' entry", where) for x in value]
