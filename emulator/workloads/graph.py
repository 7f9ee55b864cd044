"""Workloads: operator graphs of real model shapes, and a cost model per device type.

A workload is a DAG of operators in topological order. Each operator knows its tensor
shapes, the floating point operations it does and the bytes it moves, so its run time can
be estimated for any device type (`op_time_us`). Three workloads ship with the zoo:

* ``recommendation`` -- a DLRM-style model: a bottom MLP over dense features, 26 embedding
  bag lookups over sparse features, a pairwise dot interaction and a top MLP.
* ``transformer`` -- one BERT-base encoder block (hidden 768, 12 heads, FFN 3072).
* ``video_pipeline`` -- decode a batch of 1080p frames, resize to 224x224, normalise and
  classify with a ResNet-50-shaped CNN.
* ``decode`` -- one token of small-batch autoregressive decoding through a 12-layer
  transformer: many tiny kernels, each shorter than the host's launch of it (a capture's
  ``launch_bound`` problem plays it).

The graphs are plain data so the tracer (`emulator.workloads.tracing`) can walk them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from emulator.perf.model import fitted_time_us

__all__ = [
    "WORKLOADS",
    "CostProfile",
    "build_workload",
    "OpNode",
    "Workload",
    "op_time_us",
    "register_cost_profile",
    "workload_for",
]

FP16 = 2  # bytes per element of activations and weights
INDEX = 8  # bytes per embedding index


@dataclass(frozen=True)
class OpNode:
    """One operator of a workload graph."""

    id: int
    name: str
    op_type: str  # "linear", "embedding_bag", "softmax", "conv2d", "decode", ...
    kind: str  # "host" | "compute" | "dma"
    shapes: list[list[int]]  # input shapes, then the output shape last
    deps: list[int]
    flops: float
    bytes: float


@dataclass(frozen=True)
class Workload:
    """A DAG of operators, nodes in topological order (every dep has a smaller id)."""

    name: str
    nodes: list[OpNode]

    def node(self, node_id: int) -> OpNode:
        return self.nodes[node_id]


class _Builder:
    """Appends nodes with consecutive ids; computes nothing by itself."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.nodes: list[OpNode] = []

    def add(
        self,
        name: str,
        op_type: str,
        kind: str,
        shapes: list[list[int]],
        deps: list[int],
        flops: float = 0.0,
        nbytes: float | None = None,
    ) -> int:
        if nbytes is None:
            nbytes = float(sum(math.prod(s) for s in shapes) * FP16)
        node = OpNode(
            len(self.nodes), name, op_type, kind, shapes, list(deps), float(flops), nbytes
        )
        self.nodes.append(node)
        return node.id

    def linear(self, name: str, dep: int, batch: int, n_in: int, n_out: int) -> int:
        shapes = [[batch, n_in], [n_in, n_out], [batch, n_out]]
        return self.add(name, "linear", "compute", shapes, [dep], flops=2.0 * batch * n_in * n_out)

    def pointwise(
        self, name: str, op_type: str, dep: int | list[int], shape: list[int], flops_per=1.0
    ) -> int:
        deps = dep if isinstance(dep, list) else [dep]
        n = math.prod(shape)
        return self.add(
            name, op_type, "compute", [list(shape)] * (len(deps) + 1), deps, flops=flops_per * n
        )

    def dma(self, name: str, dep: list[int], shape: list[int], elem_bytes: int = FP16) -> int:
        return self.add(
            name, "memcpy", "dma", [shape], dep, nbytes=float(math.prod(shape) * elem_bytes)
        )

    def host(self, name: str, op_type: str, dep: list[int], shape: list[int]) -> int:
        return self.add(name, op_type, "host", [shape], dep, nbytes=float(math.prod(shape) * FP16))

    def build(self) -> Workload:
        return Workload(self.name, self.nodes)


def _recommendation(batch: int = 256) -> Workload:
    b = _Builder("recommendation")
    dense_in, dim = 13, 64
    table_rows = [10_000_000, 5_000_000, 3_000_000, 1_000_000, 500_000, 250_000] * 4 + [
        100_000,
        50_000,
    ]
    pooling = 20  # lookups per sample per table
    prep = b.host("preprocess_features", "preprocess", [], [batch, dense_in + len(table_rows)])
    dense = b.dma("h2d_dense", [prep], [batch, dense_in])
    idx = b.dma("h2d_indices", [prep], [batch, len(table_rows), pooling], elem_bytes=INDEX)
    # bottom MLP 13-512-256-64
    x = dense
    for i, (n_in, n_out) in enumerate([(dense_in, 512), (512, 256), (256, dim)]):
        x = b.linear(f"bottom_mlp.{i}.linear", x, batch, n_in, n_out)
        x = b.pointwise(f"bottom_mlp.{i}.relu", "relu", x, [batch, n_out])
    bottom = x
    # embedding bag lookups: gather pooling rows of dim each, then sum
    pooled = []
    for t, rows in enumerate(table_rows):
        gathered = batch * pooling * dim
        pooled.append(
            b.add(
                f"embedding_bag.{t}",
                "embedding_bag",
                "compute",
                [[rows, dim], [batch, pooling], [batch, dim]],
                [idx],
                flops=float(gathered),
                nbytes=float(gathered * FP16 + batch * pooling * INDEX),
            )
        )
    n_vec = len(table_rows) + 1
    inter = b.add(
        "interaction.bmm",
        "bmm",
        "compute",
        [[batch, n_vec, dim], [batch, dim, n_vec], [batch, n_vec, n_vec]],
        [bottom, *pooled],
        flops=2.0 * batch * n_vec * n_vec * dim,
    )
    n_pairs = n_vec * (n_vec - 1) // 2
    cat = b.pointwise("interaction.concat", "concat", inter, [batch, dim + n_pairs], flops_per=0.0)
    x = cat
    widths = [(dim + n_pairs, 512), (512, 256), (256, 1)]
    for i, (n_in, n_out) in enumerate(widths):
        x = b.linear(f"top_mlp.{i}.linear", x, batch, n_in, n_out)
        if i < len(widths) - 1:
            x = b.pointwise(f"top_mlp.{i}.relu", "relu", x, [batch, n_out])
    x = b.pointwise("sigmoid", "sigmoid", x, [batch, 1], flops_per=4.0)
    out = b.dma("d2h_scores", [x], [batch, 1])
    b.host("postprocess_scores", "postprocess", [out], [batch, 1])
    return b.build()


def _transformer(
    batch: int = 8, seq: int = 128, hidden: int = 768, heads: int = 12, ffn: int = 3072
) -> Workload:
    b = _Builder("transformer")
    tokens = batch * seq
    head_dim = hidden // heads
    prep = b.host("tokenize", "tokenize", [], [batch, seq])
    x = b.dma("h2d_hidden_states", [prep], [batch, seq, hidden])
    q = b.linear("attention.q_proj", x, tokens, hidden, hidden)
    k = b.linear("attention.k_proj", x, tokens, hidden, hidden)
    v = b.linear("attention.v_proj", x, tokens, hidden, hidden)
    bh = batch * heads
    scores = b.add(
        "attention.scores_bmm",
        "bmm",
        "compute",
        [[bh, seq, head_dim], [bh, head_dim, seq], [bh, seq, seq]],
        [q, k],
        flops=2.0 * bh * seq * seq * head_dim,
    )
    probs = b.pointwise("attention.softmax", "softmax", scores, [bh, seq, seq], flops_per=5.0)
    ctx = b.add(
        "attention.context_bmm",
        "bmm",
        "compute",
        [[bh, seq, seq], [bh, seq, head_dim], [bh, seq, head_dim]],
        [probs, v],
        flops=2.0 * bh * seq * seq * head_dim,
    )
    o = b.linear("attention.out_proj", ctx, tokens, hidden, hidden)
    r1 = b.pointwise("attention.residual_add", "add", [o, x], [batch, seq, hidden])
    n1 = b.pointwise("attention.layer_norm", "layer_norm", r1, [batch, seq, hidden], flops_per=8.0)
    f1 = b.linear("ffn.intermediate", n1, tokens, hidden, ffn)
    g = b.pointwise("ffn.gelu", "gelu", f1, [batch, seq, ffn], flops_per=8.0)
    f2 = b.linear("ffn.output", g, tokens, ffn, hidden)
    r2 = b.pointwise("ffn.residual_add", "add", [f2, n1], [batch, seq, hidden])
    n2 = b.pointwise("ffn.layer_norm", "layer_norm", r2, [batch, seq, hidden], flops_per=8.0)
    out = b.dma("d2h_hidden_states", [n2], [batch, seq, hidden])
    b.host("postprocess", "postprocess", [out], [batch, seq, hidden])
    return b.build()


def _video_pipeline(frames: int = 8) -> Workload:
    b = _Builder("video_pipeline")
    src_h, src_w, size = 1080, 1920, 224
    demux = b.host("demux", "demux", [], [frames, 1 << 16])
    bitstream = b.dma("h2d_bitstream", [demux], [frames, 1 << 16], elem_bytes=1)
    decoded = b.add(
        "decode.h264",
        "decode",
        "compute",
        [[frames, 1 << 16], [frames, 3, src_h, src_w]],
        [bitstream],
        flops=frames * src_h * src_w * 40.0,
        nbytes=float(frames * 3 * src_h * src_w),
    )
    resized = b.add(
        "resize.bilinear",
        "resize",
        "compute",
        [[frames, 3, src_h, src_w], [frames, 3, size, size]],
        [decoded],
        flops=frames * 3 * size * size * 8.0,
        nbytes=float(frames * 3 * (src_h * src_w + size * size)),
    )
    x = b.pointwise("normalize", "normalize", resized, [frames, 3, size, size], flops_per=2.0)

    def conv(name: str, dep: int, c_in: int, c_out: int, hw: int, k: int, stride: int = 1) -> int:
        out_hw = hw // stride
        flops = 2.0 * frames * c_out * out_hw * out_hw * c_in * k * k
        shapes = [[frames, c_in, hw, hw], [c_out, c_in, k, k], [frames, c_out, out_hw, out_hw]]
        return b.add(name, "conv2d", "compute", shapes, [dep], flops=flops)

    # ResNet-50 shaped: stem, then one representative bottleneck per stage (x blocks)
    x = conv("classify.stem.conv7x7", x, 3, 64, size, 7, stride=2)
    x = b.pointwise("classify.stem.maxpool", "max_pool", x, [frames, 64, 56, 56], flops_per=9.0)
    stages = [(64, 256, 56, 3), (256, 512, 28, 4), (512, 1024, 14, 6), (1024, 2048, 7, 3)]
    c_in = 64
    for s, (c_mid_in, c_out, hw, blocks) in enumerate(stages, start=1):
        mid = c_out // 4
        stride = 1 if s == 1 else 2
        in_hw = hw * stride
        x = conv(f"classify.layer{s}.reduce1x1", x, c_in, mid, in_hw, 1, stride=stride)
        x = conv(f"classify.layer{s}.conv3x3", x, mid, mid, hw, 3)
        x = conv(f"classify.layer{s}.expand1x1", x, mid, c_out, hw, 1)
        # the remaining blocks of the stage, folded into one node
        x = b.add(
            f"classify.layer{s}.blocks",
            "conv2d",
            "compute",
            [[frames, c_out, hw, hw], [frames, c_out, hw, hw]],
            [x],
            flops=(blocks - 1) * 2.0 * frames * hw * hw * (2 * c_out * mid + 9 * mid * mid),
        )
        c_in = c_out
        del c_mid_in
    x = b.pointwise("classify.avgpool", "avg_pool", x, [frames, 2048, 7, 7])
    x = b.linear("classify.fc", x, frames, 2048, 1000)
    x = b.pointwise("classify.softmax", "softmax", x, [frames, 1000], flops_per=5.0)
    out = b.dma("d2h_labels", [x], [frames, 1000])
    b.host("publish_labels", "postprocess", [out], [frames, 1000])
    return b.build()


def _decode(batch: int = 1, hidden: int = 768, layers: int = 12, ffn: int = 3072, context: int = 256) -> Workload:
    """One decoding step (one new token per sequence) with a KV cache of ``context``."""
    b = _Builder("decode")
    prep = b.host("sample_previous_token", "sample", [], [batch, 1])
    x = b.dma("h2d_token_ids", [prep], [batch, 1], elem_bytes=INDEX)
    x = b.pointwise("embed", "embedding", x, [batch, hidden])
    head = hidden // 12
    for i in range(layers):
        q = b.linear(f"layer{i}.q_proj", x, batch, hidden, hidden)
        kv = b.linear(f"layer{i}.kv_proj", x, batch, hidden, 2 * hidden)
        att = b.add(f"layer{i}.attention", "bmm", "compute",
                    [[batch * 12, 1, head], [batch * 12, context, head], [batch * 12, 1, head]], [q, kv],
                    flops=4.0 * batch * 12 * context * head)
        o = b.linear(f"layer{i}.out_proj", att, batch, hidden, hidden)
        r = b.pointwise(f"layer{i}.residual_add", "add", [o, x], [batch, hidden])
        n = b.pointwise(f"layer{i}.layer_norm", "layer_norm", r, [batch, hidden], flops_per=8.0)
        f = b.linear(f"layer{i}.ffn_up", n, batch, hidden, ffn)
        g = b.pointwise(f"layer{i}.gelu", "gelu", f, [batch, ffn], flops_per=8.0)
        d = b.linear(f"layer{i}.ffn_down", g, batch, ffn, hidden)
        x = b.pointwise(f"layer{i}.ffn_add", "add", [d, n], [batch, hidden])
    logits = b.linear("lm_head", x, batch, hidden, 32_000)
    out = b.dma("d2h_logits", [logits], [batch, 32_000])
    b.host("pick_next_token", "sample", [out], [batch, 1])
    return b.build()


_BUILDERS = {
    "recommendation": _recommendation,
    "transformer": _transformer,
    "video_pipeline": _video_pipeline,
    "decode": _decode,
}
WORKLOADS: dict[str, Workload] = {name: build() for name, build in _BUILDERS.items()}


def build_workload(name: str, **shape: int) -> Workload:
    """The graph of workload ``name`` at other shapes (``batch=``, ``seq=``, ``frames=``)."""
    try:
        return _BUILDERS[name](**shape)
    except KeyError:
        raise KeyError(f"unknown workload {name!r}; expected one of {sorted(_BUILDERS)}") from None


@dataclass(frozen=True)
class CostProfile:
    """How fast one device type runs each kind of operator.

    Compute time is a roofline: the larger of flops over (peak x efficiency of that op
    type) and bytes over memory bandwidth, plus a fixed launch cost. DMA time is bytes over
    the PCIe bandwidth plus a latency. Host operators run on the host CPU.
    """

    workload: str
    peak_tflops: float
    mem_gbps: float
    pcie_gbps: float
    launch_us: float
    efficiency: dict[str, float] = field(default_factory=dict)
    # software version -> op type -> slowdown factor (versions not listed run at full speed)
    sw_penalties: dict[str, dict[str, float]] = field(default_factory=dict)
    # exactly this software version -> op type -> slowdown factor: a release that regressed
    sw_regressions: dict[str, dict[str, float]] = field(default_factory=dict)

    def efficiency_for(self, op_type: str) -> float:
        return self.efficiency.get(op_type, self.efficiency.get("default", 0.4))


HOST_GFLOPS = 50.0  # one host core
HOST_GBPS = 10.0

COST_PROFILES: dict[str, CostProfile] = {
    "video": CostProfile(
        workload="video_pipeline",
        peak_tflops=8.0,
        mem_gbps=60.0,
        pcie_gbps=3.5,
        launch_us=6.0,
        efficiency={"decode": 0.9, "resize": 0.8, "conv2d": 0.35, "linear": 0.3, "default": 0.25},
        sw_penalties={"1.0": {"decode": 1.6, "resize": 1.3}, "1.5": {"decode": 1.2}},
        sw_regressions={"2.1": {"resize": 2.0}},
    ),
    "inference": CostProfile(
        workload="recommendation",
        peak_tflops=32.0,
        mem_gbps=120.0,
        pcie_gbps=7.0,
        launch_us=4.0,
        efficiency={
            "linear": 0.6,
            "bmm": 0.5,
            "embedding_bag": 0.05,
            "conv2d": 0.4,
            "default": 0.3,
        },
        sw_penalties={"1.0": {"embedding_bag": 1.8, "bmm": 1.4}, "1.5": {"embedding_bag": 1.3}},
        sw_regressions={"2.1": {"linear": 2.0}},
    ),
    "gpu": CostProfile(
        workload="transformer",
        peak_tflops=120.0,
        mem_gbps=900.0,
        pcie_gbps=25.0,
        launch_us=8.0,
        efficiency={
            "linear": 0.7,
            "bmm": 0.55,
            "conv2d": 0.6,
            "softmax": 0.1,
            "layer_norm": 0.1,
            "default": 0.2,
        },
        sw_penalties={
            "1.0": {"softmax": 2.0, "layer_norm": 1.5, "gelu": 1.5},
            "1.5": {"softmax": 1.3},
        },
        sw_regressions={"2.1": {"bmm": 2.5}},
    ),
}

_DEFAULT_PROFILE = CostProfile(
    workload="recommendation", peak_tflops=10.0, mem_gbps=100.0, pcie_gbps=8.0, launch_us=5.0
)


def register_cost_profile(device_type: str, profile: CostProfile) -> None:
    """Adds (or replaces) the cost profile of a device type; used when onboarding a new type."""
    if profile.workload not in WORKLOADS:
        raise ValueError(
            f"unknown workload {profile.workload!r}; expected one of {sorted(WORKLOADS)}"
        )
    COST_PROFILES[device_type] = profile


def profile_for(device_type: str) -> CostProfile:
    return COST_PROFILES.get(device_type, _DEFAULT_PROFILE)


def workload_for(device_type: str) -> Workload:
    """The workload a device of this type serves."""
    return WORKLOADS[profile_for(device_type).workload]


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.split(".") if p.isdigit())


def op_time_us(
    node: OpNode, device_type: str, sw_version: str = "2.0", slowdown: float = 1.0
) -> float:
    """Estimated run time of one operator on one device type, in microseconds.

    Older software versions are slower on some op types: the penalty of the oldest listed
    version not older than ``sw_version`` applies; a release that regressed (``2.1``) is
    slower on one op type of each device type. ``slowdown`` > 1 models a throttled clock or
    a fault. Device nodes take their time from the type's fitted model when its spec has one
    (`emulator.perf.model`), else from its cost profile.
    """
    profile = profile_for(device_type)
    if node.kind == "host":
        t = 5.0 + node.flops / (HOST_GFLOPS * 1e3) + node.bytes / (HOST_GBPS * 1e3)
        return t  # the host CPU is not throttled with the device
    fitted = fitted_time_us(node, device_type)
    if fitted is not None:  # the type's spec has a model fitted from real traces
        t = fitted
    elif node.kind == "dma":
        t = 3.0 + node.bytes / (profile.pcie_gbps * 1e3)
    else:
        compute = node.flops / (profile.peak_tflops * 1e6 * profile.efficiency_for(node.op_type))
        memory = node.bytes / (profile.mem_gbps * 1e3)
        t = profile.launch_us + max(compute, memory)
    penalty = 1.0
    mine = _version_key(sw_version)
    for version in sorted(profile.sw_penalties, key=_version_key):
        if mine <= _version_key(version):
            penalty = profile.sw_penalties[version].get(node.op_type, 1.0)
            break
    penalty *= profile.sw_regressions.get(sw_version, {}).get(node.op_type, 1.0)
    return t * penalty * max(slowdown, 1.0)
