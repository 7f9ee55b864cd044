"""What a device kernel is and how big its problem is: its operator class, and the FLOPs and
bytes of the framework operator that launched it.

The class comes from the kernel's name first where the name is unambiguous (collectives,
copies, GEMM and attention kernels, layout and elementwise kernels), else from the launching
``aten::`` operator (``aten::addmm`` -> GEMM, ``aten::native_layer_norm`` -> reduction), else
``other``. File names never count.

The size comes from the launching operator's recorded input shapes (the profiler's
``record_shapes``: ``Input Dims`` and ``Input type``): ``2·M·K·N`` FLOPs for a matrix
product, ``2·N·O·H·W·C·kh·kw`` for a convolution (output the input's size, the stride read
from ``Concrete Inputs`` when there), ``4·B·H·Sq·Sk·D`` for attention, one FLOP per element
for the rest; bytes are the inputs' sizes plus an output as large as the largest input (the
matrix product's output for GEMMs). Copies and collectives take their bytes from the
kernel's own args (``bytes`` or ``size``, ``In msg nelems``). Every size is an estimate
(attention halved when causal, variable-length batches as one sequence, one FLOP per element
whatever the operator). Without shapes a kernel has no size (NaN), except elementwise and
reduction kernels, sized by their launch.

The kernel's other features: its family and library (`kernel_family`), the macro tile its
name gives (`gemm_tile`) and the output it covers (`tile_work`), and its launch (`launch_key`,
`launch_threads`). `kernels_of` gives
every device kernel of a trace with all of them (`Kernels`).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..model.kinds import _DTYPE_BYTES, collective
from ..model.links import launch_pairs
from ..model.trace import DEVICE_KINDS, Kind, Trace
from .correlation import host_operator_of

__all__ = ["OP_CLASSES", "Kernels", "classify", "gemm_tile", "kernel_family", "kernel_size", "kernels_of", "launch_key",
           "launch_threads", "tile_work"]

OP_CLASSES = ("gemm", "conv", "attention", "elementwise", "reduction", "memory", "communication", "other")

_NAME_RULES = (
    ("communication", re.compile(r"nccl|rccl", re.I)),
    # Triton's generated names say what the kernel is: pointwise, reduction, persistent
    # reduction, template (a matmul)
    ("elementwise", re.compile(r"^triton_poi_")),
    ("reduction", re.compile(r"^triton_(red|per)_")),
    ("gemm", re.compile(r"^triton_tem_.*(mm|matmul)|^triton_.*_mm_", re.I)),
    ("memory", re.compile(r"^(memcpy|memset)|^dma_request$", re.I)),
    # the helpers a GEMM or convolution launches besides its math: bias epilogues, offsets
    ("elementwise", re.compile(r"epilogue|computeOffsets", re.I)),
    ("attention", re.compile(r"flash|fmha|attn|attention", re.I)),
    ("conv", re.compile(r"conv|fprop|dgrad|wgrad|winograd|fft2d|implicit_gemm", re.I)),
    ("gemm", re.compile(r"(?<!fb)gemm|cutlass|Cijk_|matmul|wmma|xmma", re.I)),
    ("reduction", re.compile(r"reduce|norm|softmax|pool", re.I)),
    ("elementwise", re.compile(r"elementwise|nchwToNhwc|nhwcToNchw|transpose|CatArray|indexSelect|fill", re.I)),
)
_OP_RULES = (
    ("attention", re.compile(r"attention|scaled_dot_product", re.I)),
    ("conv", re.compile(r"conv", re.I)),
    ("gemm", re.compile(r"^aten::(mm|addmm|bmm|baddbmm|matmul|linear|addmv|mv|dot|_scaled_mm)$")),
    ("reduction", re.compile(r"norm|softmax|^aten::(sum|mean|max|min|all|any|amax|amin|argmax|argmin|"
                             r"cumsum|prod|var|std|topk|sort)$|pool", re.I)),
    ("elementwise", re.compile(r"^aten::")),
)
THREAD_BYTES = 8.0  # a thread of a shape-less kernel reads and writes one fp32 element
_TYPE_BYTES = {"c10::bfloat16": 2, "c10::half": 2, "long int": 8, "unsigned char": 1, "signed char": 1,
               "c10::float8_e4m3fn": 1, "c10::float8_e5m2": 1, "c10::complex<float>": 8}


_NAMESPACE_GROUP = re.compile(r"\([^()]*\)::")  # (anonymous namespace)::


def _function(kernel_name: str) -> str:
    """A kernel's function name without its template and call arguments (those name other
    functions: an elementwise kernel's functor may say ``addmm``)."""
    return re.split(r"[<(]", _NAMESPACE_GROUP.sub("", kernel_name), maxsplit=1)[0]


def classify(kernel_name: str, kind: int, op_name: str | None) -> str:
    """The operator class of a kernel, from its name, its kind and its launching operator."""
    if kind == Kind.COMM:
        return "communication"
    if kind in (Kind.MEMCPY, Kind.MEMSET):
        return "memory"
    function = _function(kernel_name)
    for cls, pattern in _NAME_RULES:
        if pattern.search(function):
            return cls
    if op_name:
        for cls, pattern in _OP_RULES:
            if pattern.search(op_name):
                return cls
    return "other"


def _elem_bytes(type_name: Any) -> int:
    text = str(type_name).lower()
    return _TYPE_BYTES.get(text) or _DTYPE_BYTES.get(text.removeprefix("c10::"), 4)


def _tensors(args: dict[str, Any]) -> list[tuple[list[int], int]]:
    """(shape, element bytes) of each tensor input (scalars and empty lists left out)."""
    dims = args.get("Input Dims") or []
    types = args.get("Input type") or []
    out = []
    for i, shape in enumerate(dims):
        if isinstance(shape, list) and shape and all(isinstance(d, int) and d >= 0 for d in shape):
            out.append((shape, _elem_bytes(types[i] if i < len(types) else "float")))
    return out


_BIAS_FIRST = re.compile(r"^aten::(addmm|baddbmm|addbmm|addmv|_addmm_activation)$")


def _gemm(op: str, tensors: list[tuple[list[int], int]]) -> tuple[float, float] | None:
    """The product's operands: the second and third inputs of ``addmm`` and its kin (the first
    is the bias), else the first two matrices (a third is the ``out=`` tensor of ``mm.out``,
    not an operand); the bytes count the operands, the bias and the output."""
    if _BIAS_FIRST.match(op):
        if len(tensors) < 3:
            return None
        tensors = tensors[:3]
        mats = tensors[1:]
    else:
        mats = [(s, b) for s, b in tensors if len(s) >= 2][:2]
        tensors = mats + [(s, b) for s, b in tensors[2:] if len(s) == 1][:1]  # linear's bias
    if len(mats) < 2 or len(mats[0][0]) < 2:
        return None
    (a, eb), (w, _) = mats[0], mats[1]
    if op == "aten::linear":  # weight [N, K]
        m, k, n = math.prod(a[:-1]), a[-1], w[0]
        batch = 1
    else:
        batch = math.prod(a[:-2]) if len(a) > 2 else 1
        m, k, n = a[-2], a[-1], w[-1]
    flops = 2.0 * batch * m * k * n
    nbytes = float(sum(math.prod(s) * b for s, b in tensors) + batch * m * n * eb)
    return flops, nbytes


def _stride(args: dict[str, Any]) -> int:
    concrete = args.get("Concrete Inputs") or []
    for value in concrete[3:5]:  # input, weight, bias, then stride in aten's convolutions
        m = re.fullmatch(r"\[(\d+)(?:,\s*\d+)*\]", str(value).strip())
        if m:
            return max(int(m.group(1)), 1)
    return 1


def _conv(args: dict[str, Any], tensors: list[tuple[list[int], int]]) -> tuple[float, float] | None:
    if len(tensors) < 2 or len(tensors[0][0]) < 3 or len(tensors[1][0]) < 3:
        return None
    (x, eb), (w, _) = tensors[0], tensors[1]
    stride = _stride(args)
    spatial = math.prod(max(d // stride, 1) for d in x[2:])
    flops = 2.0 * x[0] * w[0] * spatial * math.prod(w[1:])
    nbytes = float(sum(math.prod(s) * b for s, b in tensors) + x[0] * w[0] * spatial * eb)
    return flops, nbytes


def _causal(args: dict[str, Any]) -> bool:
    """Whether an attention operator was causal, an estimate: its first boolean input
    (``is_causal`` of ``aten::scaled_dot_product_attention`` and ``_flash_attention_forward``)."""
    bools = [str(v).strip() for v in (args.get("Concrete Inputs") or []) if str(v).strip() in ("True", "False")]
    return bool(bools) and bools[0] == "True"


def _attention(args: dict[str, Any], tensors: list[tuple[list[int], int]]) -> tuple[float, float] | None:
    """``4·B·H·Sq·Sk·D`` FLOPs (two matrix products), halved when causal; bytes of Q, K, V and
    the output. Q, K, V as [batch, seq, heads, dim] (flash) or [batch, heads, seq, dim]
    (SDPA); as [tokens, heads, dim] (variable-length, one sequence of all tokens: an upper
    bound, as the real sequences are shorter)."""
    qkv = [(s, b) for s, b in tensors if len(s) in (3, 4)]
    if len(qkv) < 2 or len(qkv[0][0]) != len(qkv[1][0]):
        return None
    (q, eb), (k, _) = qkv[0], qkv[1]
    if len(q) == 4:  # B·Sq·H and Sk·D in either layout
        flops = 4.0 * q[0] * q[1] * q[2] * k[1] * q[3]
    else:  # varlen: [tokens, heads, dim]
        flops = 4.0 * q[0] * q[1] * min(k[0], q[0]) * q[2]
    if _causal(args):
        flops /= 2.0
    nbytes = float(sum(math.prod(s) * e for s, e in qkv[:3]) + math.prod(q) * eb)
    return flops, nbytes


def _sized_from_op(cls: str, op: str, args: dict[str, Any]) -> tuple[float, float] | None:
    tensors = _tensors(args)
    if not tensors:
        return None
    if cls == "gemm":
        return _gemm(op, tensors)
    if cls == "conv":
        return _conv(args, tensors)
    if cls == "attention":
        return _attention(args, tensors)
    largest = max(math.prod(s) for s, _ in tensors)
    nbytes = float(sum(math.prod(s) * b for s, b in tensors) + largest * tensors[0][1])
    return float(largest), nbytes


def kernel_size(cls: str, kernel_name: str, kernel_args: dict[str, Any] | None, op_name: str | None,
                op_args: dict[str, Any] | None) -> tuple[float, float]:
    """(FLOPs, bytes) of one kernel's problem; NaNs where the trace does not say."""
    kernel_args = kernel_args or {}
    if cls == "memory":
        size = kernel_args.get("bytes", kernel_args.get("size"))  # MTIA's DMA requests say size
        return (0.0, float(size)) if isinstance(size, int | float) and size > 0 else (math.nan, math.nan)
    if cls == "communication":
        facts = collective(kernel_name, kernel_args)
        size = facts.get("bytes") if facts else None
        return (0.0, float(size)) if size else (math.nan, math.nan)
    if op_name and op_args:
        sized = _sized_from_op(cls, op_name, op_args)
        if sized is not None and sized[1] > 0:
            return sized
    if cls in ("gemm", "conv", "attention"):  # a tile of such a kernel's thread does far more than one element
        return math.nan, math.nan
    return _sized_from_launch(kernel_args)


def _sized_from_launch(kernel_args: dict[str, Any]) -> tuple[float, float]:
    """Without shapes, the launch geometry stands in for the problem: one element (one FLOP,
    THREAD_BYTES bytes) per thread launched (CUPTI records ``grid`` and ``block``)."""
    threads = launch_threads(kernel_args)
    return (threads, threads * THREAD_BYTES) if threads == threads else (math.nan, math.nan)


_TILE_RULES = (  # (library, pattern whose groups are the CTA tile's M, N and maybe K)
    ("hipblaslt", re.compile(r"^Cijk_.*?_MT(\d+)x(\d+)x(\d+)")),
    ("cutlass", re.compile(r"cutlass.*?(\d+)x(\d+)_(\d+)x\d+", re.I)),
    ("cudnn", re.compile(r"tilesize(\d+)x(\d+)x(\d+)", re.I)),
    ("cublas", re.compile(r"(?:sgemm|hgemm|gemm|gcgemm|scudnn|hcudnn)_(\d+)x(\d+)", re.I)),
)
_LIBRARIES = (  # the library or generator a kernel's name says it comes from
    ("nccl", re.compile(r"nccl|rccl", re.I)),
    ("hipblaslt", re.compile(r"^Cijk_")),
    ("ck", re.compile(r"ck_tile|^_ZN2ck|\bck::|device_gemm|DeviceGemm", re.I)),
    ("triton", re.compile(r"^triton_|_triton$")),
    ("flash", re.compile(r"flash|fmha|attn_fwd|attn_bwd", re.I)),
    ("cutlass", re.compile(r"cutlass", re.I)),
    ("cudnn", re.compile(r"cudnn|xmma_fprop|xmma_dgrad|xmma_wgrad|fft2d|winograd", re.I)),
    ("cublas", re.compile(r"gemm|xmma|cublas", re.I)),
    ("pytorch", re.compile(r"at::native|at_cuda_detail|\bc10::")),
)


#: Operators that Inductor names in a fused kernel but that only re-index (a view, a layout)
_TRITON_VIEWS = re.compile(r"_(?:_unsafe_view|view|reshape|permute|transpose|t|expand|squeeze|unsqueeze|"
                           r"slice|select|as_strided|alias)(?=_|$)")


def gemm_tile(kernel_name: str) -> tuple[int, ...] | None:
    """The CTA (macro) tile a GEMM or convolution kernel's name gives: ``Cijk_…_MT128x256x32_…``
    (hipBLASLt / Tensile), ``…_tilesize128x128x16_…`` (cuDNN xmma), ``cutlass_…_128x64_32x3_…``,
    ``ampere_sgemm_128x64_nn``; None when the name gives none."""
    for _, pattern in _TILE_RULES:
        m = pattern.search(kernel_name)
        if m:
            return tuple(int(g) for g in m.groups() if g)
    return None


def kernel_family(kernel_name: str) -> tuple[str, str]:
    """(library, family) of a kernel. The family names its algorithm: the function without
    template and call arguments (so every instance of ``vectorized_elementwise_kernel<4, …>``
    with the same functor is one family: the functor is kept, the vector width too) and
    without Triton's trailing instance number and the views Inductor fused in
    (``triton_red_fused__unsafe_view_add_mean`` is ``triton_red_fused_add_mean``). A GEMM's
    macro tile is part of its name, hence of its family. A copy's family is its whole name: direction and the memories it moves
    between (pageable host memory is several times slower than pinned)."""
    library = next((lib for lib, pattern in _LIBRARIES if pattern.search(kernel_name)), "other")
    if re.match(r"(Memcpy|Memset)\b", kernel_name):  # 'Memcpy HtoD (Pageable -> Device)': the memories count
        return "copy", kernel_name.strip()
    name = _NAMESPACE_GROUP.sub("", kernel_name)
    if name.startswith("void "):
        name = name[5:]
    function = re.split(r"[(]", name, maxsplit=1)[0]
    function = re.sub(r"\s+", " ", function)[:160]
    function = re.sub(r"_\d+$", "", function)  # triton_poi_fused_add_3 -> triton_poi_fused_add
    if library == "triton":  # the views Inductor fused in move no data: one algorithm with or without them
        function = _TRITON_VIEWS.sub("", function)
    return library, function


def launch_key(kernel_args: dict[str, Any] | None) -> str:
    """The launch a kernel was given, as the device recorded it: grid, block, registers per
    thread and shared memory (CUPTI); '' when none is recorded."""
    a = kernel_args or {}
    parts = [str(a.get(k)) for k in ("grid", "block", "registers per thread", "shared memory") if a.get(k) is not None]
    return "|".join(parts)


def tile_work(kernel_name: str, kernel_args: dict[str, Any] | None) -> float:
    """Output elements a GEMM or convolution kernel's tiles cover, an estimate of M·N without
    shapes: its macro tile (`gemm_tile`: M x N) times the tiles launched (CUPTI's ``grid`` counts
    thread blocks; roctracer's, ``kind`` "Dispatch Kernel", counts work-items, so divided by
    the ``block``). Its depth K, hence its FLOPs, stays unknown. NaN without tile or grid."""
    tile, a = gemm_tile(kernel_name), kernel_args or {}
    grid, block = a.get("grid"), a.get("block")
    if not tile or len(tile) < 2 or not isinstance(grid, list):
        return math.nan
    try:
        tiles = math.prod(int(g) for g in grid)
        if a.get("kind") == "Dispatch Kernel" and isinstance(block, list):
            tiles = tiles // max(math.prod(int(b) for b in block), 1)
    except (TypeError, ValueError):
        return math.nan
    return float(tiles * tile[0] * tile[1]) if tiles > 0 else math.nan


def launch_threads(kernel_args: dict[str, Any] | None) -> float:
    """Threads a kernel launched (grid · block, as CUPTI and roctracer record them); NaN when
    not recorded."""
    a = kernel_args or {}
    grid, block = a.get("grid"), a.get("block")
    if not (isinstance(grid, list) and isinstance(block, list)):
        return math.nan
    try:
        threads = float(math.prod(int(g) for g in grid) * math.prod(int(b) for b in block))
    except (TypeError, ValueError):
        return math.nan
    return threads if threads > 0 else math.nan


@dataclass
class Kernels:
    """The kernels of a trace: class, size, recorded time (µs), in start order."""

    cls: np.ndarray  # str
    flops: np.ndarray  # NaN when unknown
    bytes: np.ndarray
    dur_us: np.ndarray
    family: np.ndarray | None = None  # str: `kernel_family`'s library:function ('' when unknown)
    launch: np.ndarray | None = None  # str: `launch_key` ('' when not recorded)
    threads: np.ndarray | None = None  # grid·block threads launched (NaN when not recorded)
    tile_work: np.ndarray | None = None  # `tile_work`: output elements its tiles cover (NaN when unknown)

    def __post_init__(self) -> None:
        for f in ("family", "launch"):
            if getattr(self, f) is None:
                setattr(self, f, np.full(len(self.dur_us), "", dtype=object))
        for f in ("threads", "tile_work"):
            if getattr(self, f) is None:
                setattr(self, f, np.full(len(self.dur_us), np.nan))

    def __len__(self) -> int:
        return len(self.dur_us)

    def take(self, mask: np.ndarray) -> Kernels:
        return Kernels(*(getattr(self, f)[mask] for f in _FIELDS))

    @staticmethod
    def concat(parts: list[Kernels]) -> Kernels:
        return Kernels(*(np.concatenate([getattr(p, f) for p in parts]) for f in _FIELDS))


_FIELDS = ("cls", "flops", "bytes", "dur_us", "family", "launch", "threads", "tile_work")


def kernels_of(trace: Trace) -> Kernels:
    """Every device kernel, copy, fill and collective of ``trace`` with its class and size."""
    dev = np.flatnonzero(trace.on_device & trace.kind_mask(*DEVICE_KINDS) & (trace.dur > 0))
    dev = dev[np.argsort(trace.ts[dev], kind="stable")]
    rt, launched = launch_pairs(trace)
    ops = host_operator_of(trace, rt) if len(rt) else np.zeros(0, np.int64)
    op_of = dict(zip(launched.tolist(), ops.tolist()))
    strings = trace.strings.strings
    op_args: dict[int, dict[str, Any]] = {}
    rows = []
    for i in dev.tolist():
        op = op_of.get(i, -1)
        op_name = strings[trace.op[op]] if op >= 0 else None
        name, kind = strings[trace.name[i]], int(trace.kind[i])
        cls = classify(name, kind, op_name)
        if op >= 0 and op not in op_args:
            op_args[op] = trace.args.get(op) or {}
        kargs = trace.args.get(i)
        flops, nbytes = kernel_size(cls, name, kargs, op_name, op_args.get(op))
        library, function = kernel_family(name)
        rows.append((cls, flops, nbytes, int(trace.dur[i]) / 1000.0, f"{library}:{function}", launch_key(kargs),
                     launch_threads(kargs), tile_work(name, kargs) if cls in ("gemm", "conv") else math.nan))
    if not rows:
        return Kernels(np.zeros(0, "<U16"), *(np.zeros(0) for _ in range(3)))
    cls, flops, nbytes, dur, family, launch, threads, work = zip(*rows)
    return Kernels(np.array(cls), np.array(flops, float), np.array(nbytes, float), np.array(dur, float),
                   np.array(family, dtype=object), np.array(launch, dtype=object), np.array(threads, float),
                   np.array(work, float))
