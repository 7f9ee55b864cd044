"""Training steps for distributed jobs: a workload's forward pass, its backward pass, an
optimizer step, and the collectives that data or tensor parallelism adds between them.

* **data parallel**: every rank runs the whole model on a batch of its own; the gradients
  are all-reduced in buckets as the backward pass produces them (as PyTorch's DDP does), so
  communication overlaps the rest of the backward pass, and the optimizer step waits for
  every bucket;
* **tensor parallel**: every rank holds a 1/N slice of each layer and runs a 1/N share of
  every operator; the partial outputs of each linear and convolution layer are all-reduced
  before the next operator reads them, in the forward and in the backward pass (every layer
  row-parallel: simple, and communication-heavy as tensor parallelism is).

A step is a graph of :class:`~emulator.workloads.graph.OpNode` in topological order, where
collectives are nodes of kind ``"collective"`` (their ``op_type`` is the collective,
``bytes`` its message size). The job (``emulator.workloads.jobs``) times them: a collective ends on
every rank at once, after its last participant arrived.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from emulator.workloads.graph import OpNode, build_workload, profile_for

__all__ = ["PARALLELISMS", "TRAINING_SHAPES", "TrainingStep", "parameters", "training_step"]

PARALLELISMS = ("data", "tensor")
#: The shapes a training job runs at: steps of a few tens to hundreds of milliseconds.
TRAINING_SHAPES: dict[str, dict[str, int]] = {
    "transformer": {"batch": 256, "seq": 512},
    "recommendation": {"batch": 65536},
    "video_pipeline": {"frames": 16},
}
DDP_BUCKETS = 4
GRAD_BYTES = 4  # gradients are reduced in fp32
ACT_BYTES = 2  # activations in fp16
DTYPES = {4: "Float", 2: "Half"}  # element size -> the dtype PyTorch names
BACKWARD_FACTOR = 2.0  # a backward operator does twice its forward's work
_LAYERS = ("linear", "conv2d")


@dataclass(frozen=True)
class TrainingStep:
    """One training step of a workload on one rank."""

    workload: str
    parallelism: str
    world_size: int
    nodes: list[OpNode]

    def collectives(self) -> list[OpNode]:
        return [n for n in self.nodes if n.kind == "collective"]

    def segments(self) -> list[list[OpNode]]:
        """The nodes split after each collective: every rank runs a segment, then the job
        settles the collective that ends it."""
        out, current = [], []
        for n in self.nodes:
            current.append(n)
            if n.kind == "collective":
                out.append(current)
                current = []
        if current:
            out.append(current)
        return out


def parameters(node: OpNode) -> int:
    """Weights of a layer (linear ``[n_in, n_out]``, convolution ``[c_out, c_in, k, k]``);
    embedding tables are sharded across ranks in practice and never all-reduced."""
    if node.op_type in _LAYERS and node.kind == "compute" and len(node.shapes) >= 3:
        return math.prod(node.shapes[1])
    return 0


class _Graph:
    def __init__(self) -> None:
        self.nodes: list[OpNode] = []

    def add(self, node: OpNode, deps: list[int]) -> int:
        self.nodes.append(replace(node, id=len(self.nodes), deps=list(deps)))
        return len(self.nodes) - 1

    def collective(self, name: str, dep: int, nelems: int, elem_bytes: int) -> int:
        node = OpNode(0, name, "allreduce", "collective", [[nelems]], [], 0.0, float(nelems * elem_bytes))
        return self.add(node, [dep])


def _shard(node: OpNode, n: int) -> OpNode:
    if node.kind != "compute" or n == 1:
        return node
    return replace(node, flops=node.flops / n, bytes=node.bytes / n)


def training_step(device_type: str, parallelism: str = "data", world_size: int = 1) -> TrainingStep:
    """The training step a rank of ``device_type`` runs in a job of ``world_size`` ranks."""
    if parallelism not in PARALLELISMS:
        raise ValueError(f"unknown parallelism {parallelism!r}; expected one of {', '.join(PARALLELISMS)}")
    if world_size < 1:
        raise ValueError("a job has at least one rank")
    name = profile_for(device_type).workload
    forward = build_workload(name, **TRAINING_SHAPES.get(name, {})).nodes
    tensor = parallelism == "tensor" and world_size > 1
    g = _Graph()
    new_id: dict[int, int] = {}  # forward node -> the node its consumers read
    for node in forward:
        nid = g.add(_shard(node, world_size if tensor else 1), [new_id[d] for d in node.deps])
        new_id[node.id] = nid
        if tensor and node.op_type in _LAYERS:
            new_id[node.id] = g.collective("tp_allreduce", nid, math.prod(node.shapes[-1]), ACT_BYTES)
    last_forward = max(new_id[n.id] for n in forward if n.kind == "compute")
    grads = [n for n in reversed(forward) if n.kind == "compute"]
    total_params = sum(parameters(n) for n in grads)
    bucket_size = max(1, math.ceil(total_params / DDP_BUCKETS))
    prev, pending, reductions = last_forward, 0, []
    for k, node in enumerate(grads):
        grad = replace(node, name=f"{node.name}.backward", flops=node.flops * BACKWARD_FACTOR,
                       bytes=node.bytes * BACKWARD_FACTOR)
        prev = g.add(_shard(grad, world_size if tensor else 1), [prev])
        if tensor and node.op_type in _LAYERS:
            prev = g.collective("tp_allreduce", prev, math.prod(node.shapes[0]), ACT_BYTES)
        pending += parameters(node)
        last = k == len(grads) - 1
        if parallelism == "data" and world_size > 1 and pending and (pending >= bucket_size or last):
            reductions.append(g.collective("ddp_allreduce", prev, pending, GRAD_BYTES))
            pending = 0
    shard = world_size if tensor else 1
    params = max(1, total_params // shard)
    optimizer = OpNode(0, "optimizer.step", "adam", "compute", [[params]], [], 4.0 * params,
                       4.0 * GRAD_BYTES * params)
    g.add(optimizer, [prev, *reductions])
    return TrainingStep(name, parallelism, world_size, g.nodes)
