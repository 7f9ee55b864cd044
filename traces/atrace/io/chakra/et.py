"""Chakra execution traces in their protobuf form (``.et``).

A ``.et`` file is a sequence of length-delimited messages of the Chakra schema
(``chakra_schema/et_def.proto``): one ``GlobalMetadata``, then one ``Node`` per node. Each
length is a base-128 varint, encoded and decoded with the protobuf library's own helpers.
Nodes are turned into the graph model of :mod:`.chakra_graph` and read with the same rules as
the JSON form (parent links, missing nodes, scheduling).
"""

from __future__ import annotations

import gc
from pathlib import Path
from typing import Any, BinaryIO

from google.protobuf.internal.decoder import _DecodeVarint32
from google.protobuf.internal.encoder import _VarintBytes
from google.protobuf.message import DecodeError, Message

from ...errors import EmptyTraceError, TraceFormatError
from ...model.trace import Trace
from ..chakra_schema import et_def_pb2 as pb
from .graph import ChakraNode, chakra_trace, duration_ns, start_ns
from .writer import chakra_dict, write_bytes, write_chakra_json

_MESSAGE_TAGS = (0x0A, 0x12)  # GlobalMetadata's first field: version (1) or attr (2)
_LISTS = frozenset(f.name for f in pb.AttributeProto.DESCRIPTOR.fields if f.name.endswith("_list"))
_NODE_TYPES = frozenset(pb.NodeType.values())
_IO_ATTRS = ("input_shapes", "input_types", "output_shapes", "output_types")


def looks_like_chakra_et(head: bytes, where: str = "") -> bool:
    """Whether the first bytes of a file (or its name) say it is a Chakra ``.et`` file."""
    if where.endswith((".et", ".et.gz")):
        return True  # the name says so (an empty or damaged .et gets the .et reader's error)
    if not head or head.lstrip()[:1] in (b"{", b"["):
        return False  # JSON
    try:
        size, pos = _DecodeVarint32(head, 0)
    except (IndexError, DecodeError):
        return False
    if size == 0 or head[pos:pos + 1] not in (bytes([t]) for t in _MESSAGE_TAGS):
        return False
    body = head[pos:pos + size]
    if len(body) < size:
        return True  # a metadata message longer than the head: trust the tag
    try:
        pb.GlobalMetadata().ParseFromString(body)
    except DecodeError:
        return False
    return True


# -- reading ------------------------------------------------------------------------------
def read_chakra_et(stream: BinaryIO, where: str = "trace") -> Trace:
    """Read a Chakra ET protobuf file (the whole file is read at once)."""
    data = stream.read()
    if not data:
        raise EmptyTraceError("empty file: a Chakra ET file starts with a GlobalMetadata message", where)
    messages = split_messages(data, where)
    metadata = _parse(pb.GlobalMetadata(), messages[0], where, "GlobalMetadata")
    collecting = gc.isenabled()
    gc.disable()  # a node is a few small objects and none are cycles: collections only cost
    try:
        nodes = [
            _node(_parse(pb.Node(), m, where, f"node #{k}"), f"{where}, node #{k} (byte {m[0]})")
            for k, m in enumerate(messages[1:])
        ]
    finally:
        if collecting:
            gc.enable()
    if not nodes:
        raise EmptyTraceError("the Chakra ET file holds metadata but no nodes", where)
    meta = {"global_metadata": {"version": metadata.version, "attr": _attrs(metadata.attr)}}
    return chakra_trace(nodes, meta, where)


def split_messages(data: bytes, where: str) -> list[tuple[int, memoryview]]:
    """(offset, body) of each length-delimited message, checking every length fits."""
    view = memoryview(data)
    out = []
    pos = 0
    while pos < len(data):
        try:
            size, body = _DecodeVarint32(data, pos)
        except (IndexError, DecodeError):
            raise TraceFormatError(
                f"message #{len(out)}: its length prefix is cut off or not a varint "
                "(truncated, or not a Chakra ET file)", f"{where}, byte {pos}") from None
        if body + size > len(data):
            raise TraceFormatError(
                f"message #{len(out)} declares {size} bytes but only {len(data) - body} are left "
                "(truncated, or not a Chakra ET file)", f"{where}, byte {pos}")
        out.append((pos, view[body:body + size]))
        pos = body + size
    return out


def _parse(message: Message, item: tuple[int, memoryview], where: str, what: str) -> Any:
    offset, body = item
    try:
        message.ParseFromString(body)
    except DecodeError as exc:
        raise TraceFormatError(
            f"{what} is not a valid Chakra message ({exc})", f"{where}, byte {offset}") from None
    return message


def _node(msg: pb.Node, at: str) -> ChakraNode:
    attrs = _attrs(msg.attr)
    for prefix in ("input", "output"):
        if msg.HasField(f"{prefix}s"):
            info = getattr(msg, f"{prefix}s")
            attrs.update({f"{prefix}_{k}": getattr(info, k) for k in ("shapes", "types") if getattr(info, k)})
    if msg.type not in _NODE_TYPES:
        raise TraceFormatError(f"unknown node type {msg.type}", at)
    return ChakraNode(
        id=msg.id,
        name=msg.name,
        type=pb.NodeType.Name(msg.type),
        data=list(msg.data_deps),
        ctrl=list(msg.ctrl_deps),
        dur=duration_ns(msg.duration_micros, attrs, at),
        start=start_ns(msg.start_time_micros, attrs, at),
        attrs=attrs,
        where=at,
    )


def _attrs(attrs) -> dict[str, Any]:
    out = {}
    for a in attrs:
        which = a.WhichOneof("value")
        if which is None:
            out[a.name] = None
        elif which in _LISTS:
            values = list(getattr(a, which).values)
            out[a.name] = [v.hex() for v in values] if which == "bytes_list" else values
        else:
            value = getattr(a, which)
            out[a.name] = value.hex() if which == "bytes_val" else value
    return out


# -- writing ------------------------------------------------------------------------------
def chakra_et_bytes(trace: Trace) -> bytes:
    """The trace's work events as a Chakra ET protobuf file."""
    doc = chakra_dict(trace)
    meta = doc["global_metadata"]
    parts = [_delimited(pb.GlobalMetadata(version=meta["version"], attr=meta["attr"]))]
    parts += [_delimited(_node_message(n)) for n in doc["nodes"]]
    return b"".join(parts)


def _node_message(node: dict[str, Any]) -> pb.Node:
    attrs = node["attr"]
    io = {a["name"]: a["string_val"] for a in attrs if a["name"] in _IO_ATTRS}
    msg = pb.Node(
        id=node["id"],
        name=node["name"],
        type=node["type"],
        ctrl_deps=node["ctrl_deps"],
        data_deps=node["data_deps"],
        start_time_micros=node["start_time_micros"],
        duration_micros=node["duration_micros"],
        attr=[a for a in attrs if a["name"] not in _IO_ATTRS],
    )
    for prefix, info in (("input", msg.inputs), ("output", msg.outputs)):
        for key in ("shapes", "types"):
            if f"{prefix}_{key}" in io:
                setattr(info, key, io[f"{prefix}_{key}"])
    return msg


def _delimited(message: Message) -> bytes:
    return _VarintBytes(message.ByteSize()) + message.SerializeToString()


def write_chakra(trace: Trace, target) -> None:
    """Write the trace as Chakra ET JSON to a path (``.gz`` compresses) or a binary file; a
    path named ``.et`` or ``.et.gz`` gets the protobuf form (:func:`write_chakra_et`)."""
    if isinstance(target, str | Path) and str(target).endswith((".et", ".et.gz")):
        write_chakra_et(trace, target)
    else:
        write_chakra_json(trace, target)


def write_chakra_et(trace: Trace, target) -> None:
    """Write the trace as a Chakra ET protobuf file to a path (``.gz`` compresses) or a
    binary file."""
    write_bytes(chakra_et_bytes(trace), target)
