"""What device work is: computation, communication or memory, and what a collective moves.

Public and small on purpose: the readers use it to give events their kind, the Chakra writer
to write collectives as ``COMM_COLL_NODE`` with their type and size, the dashboard to colour
and split device time.

* **communication**: NCCL / RCCL kernels (their names carry ``nccl``: ``ncclKernel_AllReduce_*``,
  ``ncclDevKernel_*``; RCCL keeps the prefix) and events of a communication category;
* **memory**: copies and fills (``gpu_memcpy``, ``gpu_memset``, kernels named ``Memcpy ...`` /
  ``Memset ...``, MTIA ``dma_request``);
* **computation**: every other kernel.

This is how Holistic Trace Analysis splits kernels too, so the shares compare.
:func:`collective` reads a collective's name and message size from the args PyTorch writes
(``Collective name``, ``In msg nelems``, ``dtype``, ``Process Group Name``, ``Process Group
Ranks``, ``Seq``) or, failing those, from the kernel's name. :func:`runtime_name` maps ROCm
runtime calls onto their CUDA names (``hipLaunchKernel`` -> ``cudaLaunchKernel``) so that two
vendors' traces compare call for call.
"""

from __future__ import annotations

import re
from functools import lru_cache
from operator import attrgetter
from typing import Any

import msgspec
import numpy as np

from .trace import Kind, Trace

COMPUTATION = "computation"
COMMUNICATION = "communication"
MEMORY = "memory"
WORK_CLASSES = (COMPUTATION, COMMUNICATION, MEMORY)

_CLASS_OF_KIND = {Kind.KERNEL: COMPUTATION, Kind.COMM: COMMUNICATION, Kind.MEMCPY: MEMORY, Kind.MEMSET: MEMORY}
_COMM_NAME = re.compile(r"nccl|rccl", re.IGNORECASE)
_KERNEL_COLLECTIVE = re.compile(r"(?:nccl|rccl)(?:Dev)?Kernel_([A-Za-z]+)", re.IGNORECASE)
_HOST_COLLECTIVE = re.compile(r"^gloo:([a-z_]+)$")  # gloo's annotation of a collective it runs
_DTYPE_BYTES = {
    "float": 4, "float32": 4, "int": 4, "int32": 4, "uint32": 4,
    "double": 8, "float64": 8, "long": 8, "int64": 8, "uint64": 8, "complexfloat": 8,
    "half": 2, "float16": 2, "bfloat16": 2, "short": 2, "int16": 2,
    "byte": 1, "char": 1, "bool": 1, "int8": 1, "uint8": 1,
    "float8_e4m3fn": 1, "float8_e5m2": 1, "float8_e4m3fnuz": 1, "float8_e5m2fnuz": 1,
    "complexdouble": 16,
}


def device_kind(kind: int, name: str) -> int:
    """The kind a device event gets from its name (communication, copies, fills)."""
    if kind not in (Kind.KERNEL, Kind.MEMCPY, Kind.MEMSET, Kind.COMM):
        return kind
    if _COMM_NAME.search(name):
        return Kind.COMM
    if kind == Kind.KERNEL:
        if name.startswith("Memcpy") or name == "dma_request":
            return Kind.MEMCPY
        if name.startswith("Memset"):
            return Kind.MEMSET
    return kind


def classify_device_work(trace: Trace) -> None:
    """Give device events their kind by name (in place; one look per distinct name)."""
    dev = np.flatnonzero(trace.on_device & np.isin(trace.kind, [int(k) for k in _CLASS_OF_KIND]))
    if not len(dev):
        return
    pairs = trace.name[dev].astype(np.int64) * 256 + trace.kind[dev]
    uniq, inv = np.unique(pairs, return_inverse=True)
    strings = trace.strings.strings
    new = np.array([device_kind(int(p) % 256, strings[int(p) // 256]) for p in uniq.tolist()], np.uint8)
    trace.kind[dev] = new[inv]


def work_class(kind: int) -> str | None:
    """'computation', 'communication' or 'memory' for device work kinds, else None."""
    return _CLASS_OF_KIND.get(Kind(int(kind)))


def work_classes(trace: Trace) -> np.ndarray:
    """Per event: index into :data:`WORK_CLASSES` for device work, -1 for anything else."""
    out = np.full(len(trace), -1, np.int8)
    dev = trace.on_device & trace.is_slice
    for k, cls in _CLASS_OF_KIND.items():
        out[dev & (trace.kind == k)] = WORK_CLASSES.index(cls)
    return out


def collective(name: str, args: dict[str, Any] | None) -> dict[str, Any] | None:
    """A collective's facts from its args and name, or None if it is not one.

    Keys: ``collective`` (lower case, e.g. ``allreduce``), ``bytes`` (input message size,
    None when unknown), ``dtype``, ``group`` (process group name), ``group_ranks`` (list),
    ``group_size``, ``seq`` (None when the trace does not say).
    """
    args = args if isinstance(args, dict) else {}
    return _facts(name, *(args.get(key) for key in _COLLECTIVE_KEYS))


class _CollectiveArgs(msgspec.Struct, gc=False):
    """The args :func:`collective` reads, and only those (the others are skipped unread)."""

    name: Any = msgspec.field(default=None, name="Collective name")
    nelems: Any = msgspec.field(default=None, name="In msg nelems")
    out_nelems: Any = msgspec.field(default=None, name="Out msg nelems")
    dtype: Any = None
    group: Any = msgspec.field(default=None, name="Process Group Name")
    group_ranks: Any = msgspec.field(default=None, name="Process Group Ranks")
    group_size: Any = msgspec.field(default=None, name="Group size")
    seq: Any = msgspec.field(default=None, name="Seq")


_COLLECTIVE_KEYS = [f.encode_name for f in msgspec.structs.fields(_CollectiveArgs)]
_COLLECTIVE_ARGS = msgspec.json.Decoder(list[_CollectiveArgs])
_FIELDS = attrgetter(*(f.name for f in msgspec.structs.fields(_CollectiveArgs)))


def collectives(trace: Trace, events: list[int]) -> list[dict[str, Any] | None]:
    """:func:`collective` of each of ``events``, their args decoded in one pass (a job's
    ranks hold hundreds of thousands of collectives)."""
    at = np.asarray(events, np.int64)
    names = [trace.strings.strings[n] for n in trace.name[at].tolist()]
    offsets, blob = trace.args.offsets, trace.args.blob
    raws = [blob[a:b] or b"{}" for a, b in zip(offsets[at].tolist(), offsets[at + 1].tolist())]
    try:
        decoded = _COLLECTIVE_ARGS.decode(b"[" + b",".join(raws) + b"]")
    except (msgspec.DecodeError, msgspec.ValidationError):  # args that are not an object: one at a time
        return [collective(name, trace.args.get(e)) for name, e in zip(names, events)]
    # A group's collectives repeat their facts but for the sequence number: each distinct set
    # is worked out once (its lists shared between the answers, which no caller changes).
    known: dict[tuple, dict[str, Any] | None] = {}
    out = []
    for name, a in zip(names, decoded):
        *same, seq = _FIELDS(a)
        key = (name, *same, *map(type, same))  # with the types: 4 and 4.0 are equal keys
        try:
            base = known[key]
        except KeyError:
            base = known[key] = _facts(name, *same, None)
        except TypeError:  # a list or object among them: not a key
            base = _facts(name, *same, None)
        out.append(None if base is None else {**base, "seq": seq})
    return out


def _facts(name: str, coll, nelems, out_nelems, dtype, group, group_ranks, group_size, seq) -> dict[str, Any] | None:
    if not coll:
        m = _KERNEL_COLLECTIVE.search(name) or _HOST_COLLECTIVE.match(name)
        if not m and not _COMM_NAME.search(name):
            return None
        coll = m.group(1) if m else name
    size = _DTYPE_BYTES.get(str(dtype).lower()) if dtype is not None else None
    return {
        "collective": str(coll).lower().replace("_", ""),
        "bytes": _message_bytes(nelems, size),
        "out_bytes": _message_bytes(out_nelems, size),
        "dtype": dtype,
        "group": _text_or_none(group),
        "group_ranks": _ranks(group_ranks),
        "group_size": group_size,
        "seq": seq,
    }


def _message_bytes(nelems: Any, size: int | None) -> int | None:
    """A message's size in bytes; None when unknown or past what a report can hold (64 bits)."""
    if not size or isinstance(nelems, bool) or not isinstance(nelems, int):
        return None
    return nelems * size if 0 <= nelems * size < 2**63 else None


def _text_or_none(value: Any) -> str | None:
    return None if value is None else str(value)


def _ranks(value: Any) -> list[int] | None:
    if isinstance(value, list):
        return [int(x) for x in value if isinstance(x, int)]
    if isinstance(value, str):
        found = _ranks_in_text(value)
        return list(found) if found else None
    return None


@lru_cache(maxsize=64)
def _ranks_in_text(value: str) -> tuple[int, ...]:
    """Rank numbers written as text ("[0, 1, 2]"): every collective of a group repeats it."""
    return tuple(int(x) for x in re.findall(r"-?\d+", value))


_HIP = re.compile(r"^(_*)hip")


def runtime_name(name: str) -> str:
    """The CUDA name of a runtime call: ``hipMemcpyAsync`` -> ``cudaMemcpyAsync``."""
    return _HIP.sub(r"\1cuda", name, count=1)
