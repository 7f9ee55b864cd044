"""A device type's fitted performance model, read from its Asimov spec, and operator times
from it.

``python -m emulator fit`` writes a ``performance`` section into a type's spec (one
bandwidth--latency curve per operator class, see `fleet.asimov.performance`). When the spec
of a type has one, its workloads run with it: `fitted_time_us` gives a graph node's time
from its class's curve (``latency_us + flops / tflops + bytes / gbps``), and
`emulator.workloads.graph.op_time_us` uses that instead of the type's hand-set cost profile. Nodes
of a class the model lacks, and every node of a type whose spec has no model (or no spec),
keep the cost profile: the same seed gives the same traces as before.

Specs are looked for as the monitor looks for them: in ``ASIMOV_SPEC_DIRS`` (``:``-separated)
and then among the specs that ship with Asimov. A spec is read again when its file changes
(its modification time is looked at no more than once a second per type).
"""

from __future__ import annotations

import math
import os
import threading
import time
from pathlib import Path
from typing import Any

from fleet.asimov.compiler import compile_file
from fleet.asimov.loader import find_spec

__all__ = ["OP_CLASS", "curve_us", "fitted_time_us", "forget", "model_for", "node_size", "op_class", "spec_dirs"]

#: The operator class of each op type of the emulator's workloads (``dma`` nodes: memory).
OP_CLASS = {
    "linear": "gemm", "bmm": "gemm", "conv2d": "conv",
    "softmax": "reduction", "layer_norm": "reduction", "max_pool": "reduction", "avg_pool": "reduction",
    "relu": "elementwise", "gelu": "elementwise", "add": "elementwise", "sigmoid": "elementwise",
    "concat": "elementwise", "normalize": "elementwise", "embedding": "elementwise",
    "embedding_bag": "elementwise", "resize": "elementwise", "memcpy": "memory",
    "allreduce": "communication", "allgather": "communication", "reducescatter": "communication",
}
RECHECK_S = 1.0

_LOCK = threading.Lock()
_CACHE: dict[str, tuple[float, Any, dict | None]] = {}  # type -> (checked at, file key, model)


def spec_dirs() -> tuple[str, ...]:
    """The extra spec folders of ``ASIMOV_SPEC_DIRS`` (the agent's setting, read here too)."""
    raw = os.environ.get("ASIMOV_SPEC_DIRS", "")
    return tuple(p for p in raw.split(":") if p.strip())


def _file_key(path: Path | None) -> tuple[str, int] | None:
    if path is None:
        return None
    try:
        return str(path), path.stat().st_mtime_ns
    except FileNotFoundError:
        return None


def model_for(device_type: str) -> dict[str, dict[str, float]] | None:
    """The fitted model of ``device_type`` (class -> parameters), None when its spec has none."""
    now = time.monotonic()
    cached = _CACHE.get(device_type)
    if cached is not None and now - cached[0] < RECHECK_S:
        return cached[2]
    key = _file_key(find_spec(device_type, spec_dirs()))
    with _LOCK:
        cached = _CACHE.get(device_type)
        if cached is not None and cached[1] == key:
            _CACHE[device_type] = (now, key, cached[2])
            return cached[2]
        model = (compile_file(key[0]).performance or None) if key is not None else None
        _CACHE[device_type] = (now, key, model)
        return model


def forget() -> None:
    """Drops every cached model (the next look reads the specs again)."""
    with _LOCK:
        _CACHE.clear()


def op_class(op_type: str, kind: str) -> str:
    return "memory" if kind == "dma" else OP_CLASS.get(op_type, "other")


def curve_us(params: dict[str, float], flops: float, nbytes: float) -> float:
    t = float(params["latency_us"])
    if params.get("tflops"):
        t += flops / (params["tflops"] * 1e6)
    if params.get("gbps"):
        t += nbytes / (params["gbps"] * 1e3)
    return t


def node_size(node, cls: str) -> tuple[float, float]:
    """(FLOPs, bytes) of a node as the fit counts them: an elementwise or reduction kernel's
    FLOPs are its elements (the output's), whatever its op does per element."""
    if cls in ("elementwise", "reduction") and node.shapes:
        return float(math.prod(node.shapes[-1])), node.bytes
    return node.flops, node.bytes


def fitted_time_us(node, device_type: str) -> float | None:
    """A workload node's time (µs) from its type's fitted model, before software penalties
    and slowdowns; None when the type has no model or the model lacks the node's class."""
    model = model_for(device_type)
    if not model:
        return None
    cls = op_class(node.op_type, node.kind)
    params = model.get(cls)
    if params is None:
        return None
    return curve_us(params, *node_size(node, cls))
