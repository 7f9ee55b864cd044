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
from typing import Any

import numpy as np

from .trace import Kind, Trace

COMPUTATION = "computation"
COMMUNICATION = "communication"
MEMORY = "memory"
WORK_CLASSES = (COMPUTATION, COMMUNICATION, MEMORY)

_CLASS_OF_KIND = {Kind.KERNEL: COMPUTATION, Kind.COMM: COMMUNICATION, Kind.MEMCPY: MEMORY, Kind.MEMSET: MEMORY}
_COMM_NAME = re.compile(r"nccl|rccl", re.IGNORECASE)
_KERNEL_COLLECTIVE = re.compile(r"(?:nccl|rccl)(?:Dev)?Kernel_([A-Za-z]+)", re.IGNORECASE)
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
    args = args or {}
    coll = args.get("Collective name")
    if not coll:
        m = _KERNEL_COLLECTIVE.search(name)
        if not m and not _COMM_NAME.search(name):
            return None
        coll = m.group(1) if m else name
    nelems = args.get("In msg nelems")
    dtype = args.get("dtype")
    size = _DTYPE_BYTES.get(str(dtype).lower()) if dtype is not None else None
    return {
        "collective": str(coll).lower().replace("_", ""),
        "bytes": int(nelems) * size if isinstance(nelems, int) and size else None,
        "out_bytes": int(args["Out msg nelems"]) * size
        if isinstance(args.get("Out msg nelems"), int) and size else None,
        "dtype": dtype,
        "group": _text_or_none(args.get("Process Group Name")),
        "group_ranks": _ranks(args.get("Process Group Ranks")),
        "group_size": args.get("Group size"),
        "seq": args.get("Seq"),
    }


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
