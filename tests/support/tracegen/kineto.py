"""A generator of realistic PyTorch-profiler (Kineto) traces of GPU training steps.

Used by the benchmark and the tests, where real GPU traces of a chosen size are needed on
a machine without a GPU. The traces look like those recent PyTorch writes (compare the
shared real traces ``ddp_nccl_rank0`` and ``torch_compile_triton``):

* Kineto's own layout: one event over several lines, the CPU operators of a step first
  (in start order), then the runtime calls and the device work (the CUPTI part);
  process and thread names at the end, after the ``PyTorch Profiler`` span;
* times as epoch-like microseconds with three decimals (``4458676522690.655``) on every
  event, durations with three decimals too;
* operator stacks several levels deep: ``ProfilerStep#N`` > ``DistributedDataParallel.forward``
  > ``aten::linear`` > ``aten::t`` > ``aten::transpose`` > ``aten::as_strided``, and on the
  autograd thread ``autograd::engine::evaluate_function: AddmmBackward0`` >
  ``AddmmBackward0`` > ``aten::mm`` > ``cudaLaunchKernel``;
* the args PyTorch records: ``External id``, ``Record function id``, ``Ev Idx``,
  ``Input Dims`` and ``Input type`` on operators, ``Sequence number`` and ``Fwd thread id``
  on those that make autograd nodes; ``cbid`` and ``correlation`` on runtime calls; grid,
  block, registers, shared memory, occupancy, stream and correlation on kernels;
* both kinds of flows: ``ac2g`` from each launch to its kernel, ``fwdbwd`` from each
  forward operator to its backward node.

Per million events that is about 415k CPU operators, 123k runtime calls, 123k kernels,
123k ``ac2g`` and 46k ``fwdbwd`` flows (two events each): the proportions of
``ddp_nccl_rank0``. Each step also has a host-to-device copy, an all-reduce on a
communication stream, an optimizer step on a second stream and a ``cudaStreamSynchronize``.

``shape="compact"`` writes the shape this generator had before (:mod:`.compact`).
The file is written a step at a time, so traces of millions of events need little memory.
"""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path

import orjson

from .compact import write_compact_trace
from .frame import (
    ADD,
    ALLREDUCE,
    BWD_TID,
    COMM_STREAM,
    COMPUTE_STREAM,
    CPU_PID,
    ELEMENTWISE,
    GEMM,
    GEMM_BWD,
    GPU,
    MAIN_TID,
    MEMCPY,
    MULTI_TENSOR,
    OPT_STREAM,
    REDUCE,
    THRESHOLD_BWD,
    trailer_events,
    write_header,
    write_trailer,
)

T0_NS = 4_458_676_416_431_397  # the first step starts here (us text 4458676416431.397)


# Launch configuration per kernel: registers per thread, shared memory, blocks per SM,
# warps per SM, grid, block, est. achieved occupancy %.
_LAUNCH = {
    GEMM: (128, 16384, 1.939394, 7.757576, (256, 1, 1), (128, 1, 1), 12),
    GEMM_BWD: (90, 8192, 3.878788, 15.515152, (512, 1, 1), (128, 1, 1), 24),
    ELEMENTWISE: (16, 0, 3.878788, 31.030304, (512, 1, 1), (256, 1, 1), 47),
    THRESHOLD_BWD: (18, 0, 3.878788, 31.030304, (512, 1, 1), (256, 1, 1), 46),
    REDUCE: (32, 16, 0.484848, 7.757576, (64, 1, 1), (512, 1, 1), 12),
    ADD: (16, 0, 7.757576, 62.060608, (1024, 1, 1), (256, 1, 1), 88),
    MULTI_TENSOR: (30, 0, 2.424242, 19.393940, (320, 1, 1), (512, 1, 1), 30),
    ALLREDUCE: (96, 87568, 0.060606, 1.030303, (8, 1, 1), (544, 1, 1), 0),
}

_X = ('  {\n    "ph": "X", "cat": "%s", "name": %s, "pid": %d, "tid": %d,\n'
      '    "ts": %d.%03d, "dur": %d.%03d,\n    "args": {\n      %s\n    }\n  }')
_FLOW_S = ('  {\n    "ph": "s", "id": %d, "pid": %d, "tid": %d, "ts": %d.%03d,\n'
           '    "cat": "%s", "name": "%s"\n  }')
_FLOW_F = ('  {\n    "ph": "f", "id": %d, "pid": %d, "tid": %d, "ts": %d.%03d,\n'
           '    "cat": "%s", "name": "%s", "bp": "e"\n  }')
_OP_ARGS = '"External id": %d,"Record function id": %d, %s"Ev Idx": %d'
_RUNTIME_ARGS = '"External id": %d,      "cbid": %d, "correlation": %d'
_CBID = {"cudaLaunchKernel": 211, "cudaMemcpyAsync": 41, "cudaStreamSynchronize": 131}


def _inputs(dims: list, types: list) -> str:
    """The ``Input Dims`` and ``Input type`` args of an operator, as Kineto prints them."""
    return f'"Input Dims": {json.dumps(dims)}, "Input type": {json.dumps(types)}, '


def _shapes(width: int) -> dict[str, str]:
    """Recorded input shapes per operator for a model of ``width`` features, batch 64."""
    w, x, f = width, [64, width], "float"
    return {
        "aten::to": _inputs([x, [], [], [], []], [f, "Scalar", "Scalar", "Scalar", "Scalar"]),
        "aten::_to_copy": _inputs([x, [], [], [], []], [f, "Scalar", "Scalar", "Scalar", "Scalar"]),
        "aten::copy_": _inputs([x, x, []], [f, f, "Scalar"]),
        "aten::linear": _inputs([x, [w, w], [w]], [f, f, f]),
        "aten::t": _inputs([[w, w]], [f]),
        "aten::transpose": _inputs([[w, w], [], []], [f, "Scalar", "Scalar"]),
        "aten::as_strided": _inputs([[w, w], [], [], []], [f, "ScalarList", "ScalarList", "Scalar"]),
        "aten::addmm": _inputs([[w], x, [w, w], [], []], [f, f, f, "Scalar", "Scalar"]),
        "aten::relu": _inputs([x], [f]),
        "aten::clamp_min": _inputs([x, []], [f, "Scalar"]),
        "aten::threshold_backward": _inputs([x, x, []], [f, f, "Scalar"]),
        "aten::mm": _inputs([x, [w, w]], [f, f]),
        "aten::mm.wgrad": _inputs([[w, 64], x], [f, f]),
        "aten::sum": _inputs([x, [], [], []], [f, "ScalarList", "Scalar", ""]),
        "aten::add_": _inputs([[w, w], [w, w], []], [f, f, "Scalar"]),
        "aten::_foreach_add_": _inputs([[], [], []], ["TensorList", "TensorList", "Scalar"]),
    }


class _Writer:
    """Collects a step's events, then writes them in Kineto's order (:meth:`flush`)."""

    def __init__(self, out, rng: random.Random, width: int):
        self.out = out
        self.rng = rng
        self.first = True
        self.count = 0
        self.ext = 0  # External id (and Record function id) of the last operator begun
        self.corr = 0  # runtime correlation ids
        self.flow = 0  # fwdbwd flow ids
        self.seq_nr = 0  # autograd sequence numbers
        self.ev_idx = 0
        self.stream_free = {COMPUTE_STREAM: 0, OPT_STREAM: 0, COMM_STREAM: 0}
        self.host: list[tuple] = []  # (ts, -dur, order, text or fields): operators, fwdbwd flows
        self.device: list[tuple] = []  # runtime calls, device work, ac2g flows
        self.shapes = _shapes(width)
        self.names: dict[str, bytes] = {}
        self.seq = 0  # collectives issued
        self.collective_args = False  # write PyTorch's collective args on communication
        self.world = 1
        self.delay = 0  # extra host time (ns) before each all-reduce (a straggler rank)

    def us(self, lo: float, hi: float) -> int:
        """A random duration between ``lo`` and ``hi`` microseconds, in ns."""
        return int(self.rng.uniform(lo, hi) * 1000)

    def lognormal_us(self, mu: float, sigma: float) -> int:
        return int(self.rng.lognormvariate(mu, sigma) * 1000)

    def begin(self) -> int:
        """A new operator's External id (given when it begins, so parents get lower ids)."""
        self.ext += 1
        return self.ext

    def _name(self, name: str) -> str:
        text = self.names.get(name)
        if text is None:
            text = self.names[name] = orjson.dumps(name).decode()
        return text

    def op(self, name: str, start: int, end: int, tid: int, ext: int, *, cat: str = "cpu_op",
           extra: str = "", shape: str | None = None) -> None:
        """A CPU operator (or annotation) from ``start`` to ``end`` ns."""
        inputs = self.shapes.get(shape or name, "") if cat == "cpu_op" else ""
        self.host.append((start, start - end, len(self.host), (cat, name, tid, end - start, ext, extra + inputs)))

    def autograd_node(self, ts: int) -> tuple[str, int]:
        """A forward operator at ``ts`` that makes an autograd node: its args and the flow."""
        self.seq_nr += 1
        self.flow += 1
        self.host.append((ts, 0, len(self.host), _FLOW_S % (self.flow, CPU_PID, MAIN_TID, *divmod(ts, 1000),
                                                            "fwdbwd", "fwdbwd")))
        return f'"Sequence number": {self.seq_nr}, "Fwd thread id": 0, ', self.flow

    def backward_node(self, ts: int, node: tuple[str, int]) -> str:
        """The backward of ``node`` running at ``ts``: its flow's finish; returns its args."""
        args, flow = node
        self.host.append((ts, 0, len(self.host), _FLOW_F % (flow, CPU_PID, BWD_TID, *divmod(ts, 1000),
                                                            "fwdbwd", "fwdbwd")))
        return args.replace('"Fwd thread id": 0', '"Fwd thread id": 1')

    def runtime(self, name: str, start: int, end: int, tid: int, ext: int, corr: int) -> None:
        args = _RUNTIME_ARGS % (ext, _CBID.get(name, 0), corr)
        self.device.append((start, start - end, len(self.device), ("cuda_runtime", name, tid, end - start, args)))

    def launch(self, t: int, tid: int, ext: int, kernel: str, kdur: int, stream: int, *,
               call: str = "cudaLaunchKernel", cat: str = "kernel", extra: str = "") -> int:
        """A runtime call at ``t`` and the device work it starts; returns the call's end."""
        self.corr += 1
        c = self.corr
        end = t + self.us(3.0, 7.0)
        self.runtime(call, t, end, tid, ext, c)
        start = max(end + self.us(2.0, 12.0), self.stream_free[stream])
        self.stream_free[stream] = start + kdur
        if cat == "gpu_memcpy":
            args = (f'"External id": {ext},      "device": {GPU}, "context": 1,      "stream": {stream}, '
                    f'"correlation": {c},      "bytes": 2097152, "memory bandwidth (GB/s)": '
                    f'{2097152 / max(kdur, 1):.6f}')
        else:
            regs, smem, blocks, warps, grid, block, occ = _LAUNCH[kernel]
            args = (f'"External id": {ext},      "queued": 0, "device": {GPU}, "context": 1,      '
                    f'"stream": {stream}, "correlation": {c},      "registers per thread": {regs},      '
                    f'"shared memory": {smem},      "blocks per SM": {blocks},      "warps per SM": {warps},      '
                    f'"grid": [{grid[0]}, {grid[1]}, {grid[2]}],      "block": [{block[0]}, {block[1]}, {block[2]}],'
                    f'      "est. achieved occupancy %": {occ}{extra}')
        dev = self.device
        dev.append((start, -kdur, len(dev), (cat, kernel, stream, kdur, args)))
        dev.append((t, 0, len(dev), _FLOW_S % (c, CPU_PID, tid, *divmod(t, 1000), "ac2g", "ac2g")))
        dev.append((start, 0, len(dev), _FLOW_F % (c, GPU, stream, *divmod(start, 1000), "ac2g", "ac2g")))
        return end

    def flush(self) -> None:
        """Write the step: operators in start order (parents first), then the CUPTI part."""
        parts = []
        for events, host in ((self.host, True), (self.device, False)):
            events.sort()
            for ts, _negdur, _order, body in events:
                if isinstance(body, str):
                    parts.append(body)
                    continue
                cat, name, tid, dur, *rest = body
                if host:
                    ext, extra = rest
                    args = _OP_ARGS % (ext, ext, extra, self.ev_idx)
                    self.ev_idx += 1
                    pid = CPU_PID
                else:
                    (args,) = rest
                    pid = CPU_PID if cat == "cuda_runtime" else GPU
                parts.append(_X % (cat, self._name(name), pid, tid, *divmod(ts, 1000), *divmod(dur, 1000), args))
            events.clear()
        if parts:
            self.count += len(parts)
            self.out.write(("" if self.first else ",\n").encode() + ",\n".join(parts).encode())
            self.first = False


def _step(w: _Writer, step: int, t: int, layers: int) -> int:
    """One training step starting at ``t`` (ns); returns the time it ends."""
    step_start, ext = t, w.begin()
    t = _input_copy(w, t + w.us(5, 15))
    t, nodes = _forward(w, t + w.us(3, 8), layers)
    t = _backward(w, t + w.us(10, 20), nodes)
    t = _all_reduce(w, t + w.delay)
    t = _optimizer(w, t)
    t = _synchronize(w, t)
    w.op(f"ProfilerStep#{step}", step_start, t, MAIN_TID, ext, cat="user_annotation")
    return t + w.us(20, 60)


def _input_copy(w: _Writer, t: int) -> int:
    """aten::to > aten::_to_copy > aten::copy_ > cudaMemcpyAsync, and the copy itself."""
    (to_start, to), (tc_start, tc) = (t, w.begin()), (t + w.us(2, 4), w.begin())
    cp_start, cp = tc_start + w.us(3, 6), w.begin()
    t = w.launch(cp_start + w.us(2, 5), MAIN_TID, cp, MEMCPY, w.us(20, 40), COMPUTE_STREAM,
                 call="cudaMemcpyAsync", cat="gpu_memcpy")
    t += w.us(1, 3)
    w.op("aten::copy_", cp_start, t, MAIN_TID, cp)
    t += w.us(1, 2)
    w.op("aten::_to_copy", tc_start, t, MAIN_TID, tc)
    t += w.us(1, 2)
    w.op("aten::to", to_start, t, MAIN_TID, to)
    return t + w.us(3, 8)


def _transpose(w: _Writer, t: int, tid: int, extra: str = "", with_view: bool = True) -> int:
    """aten::t > aten::transpose > aten::as_strided (no device work)."""
    start, ext = t, w.begin()
    if with_view:
        tr_start, tr = t + w.us(2, 4), w.begin()
        as_start, as_ext = tr_start + w.us(2, 4), w.begin()
        as_end = as_start + w.us(0.5, 2)
        w.op("aten::as_strided", as_start, as_end, tid, as_ext)
        t = as_end + w.us(1, 2)
        w.op("aten::transpose", tr_start, t, tid, tr)
    t += w.us(2, 4)
    w.op("aten::t", start, t, tid, ext, extra=extra)
    return t


def _forward(w: _Writer, t: int, layers: int) -> tuple[int, list]:
    """Linear + ReLU layers under ``DistributedDataParallel.forward``; returns the autograd
    nodes each layer made (for the backward pass)."""
    fwd_start, fwd = t, w.begin()
    t += w.us(4, 9)
    nodes = []
    for _layer in range(layers):
        lin_start, lin = t, w.begin()
        t += w.us(2, 4)
        t_node = w.autograd_node(t)
        t = _transpose(w, t, MAIN_TID, t_node[0])
        t += w.us(4, 8)
        mm_start, mm = t, w.begin()
        mm_node = w.autograd_node(mm_start)
        t = w.launch(t + w.us(4, 9), MAIN_TID, mm, GEMM, w.lognormal_us(3.6, 0.25), COMPUTE_STREAM)
        t += w.us(2, 5)
        w.op("aten::addmm", mm_start, t, MAIN_TID, mm, extra=mm_node[0])
        t += w.us(1, 3)
        w.op("aten::linear", lin_start, t, MAIN_TID, lin)
        t += w.us(2, 6)
        relu_start, relu = t, w.begin()
        relu_node = w.autograd_node(relu_start)
        cm_start, cm = t + w.us(3, 6), w.begin()
        t = w.launch(cm_start + w.us(3, 6), MAIN_TID, cm, ELEMENTWISE, w.lognormal_us(2.0, 0.2), COMPUTE_STREAM)
        t += w.us(1, 3)
        w.op("aten::clamp_min", cm_start, t, MAIN_TID, cm)
        t += w.us(1, 2)
        w.op("aten::relu", relu_start, t, MAIN_TID, relu, extra=relu_node[0])
        t += w.us(2, 6)
        nodes.append((t_node, mm_node, relu_node))
    t += w.us(3, 6)
    w.op("DistributedDataParallel.forward", fwd_start, t, MAIN_TID, fwd, cat="user_annotation")
    return t, nodes


def _backward(w: _Writer, t: int, nodes: list) -> int:
    """The backward pass on the autograd thread, layer by layer in reverse, while the main
    thread waits in ``autograd::engine::backward``."""
    main = w.begin()
    bt = t
    for t_node, mm_node, relu_node in reversed(nodes):
        bt = _relu_backward(w, bt + w.us(4, 8), relu_node)
        bt = _addmm_backward(w, bt + w.us(3, 6), mm_node)
        bt = _t_backward(w, bt + w.us(3, 6), t_node)
        for _ in range(2):  # weight and bias
            bt = _accumulate_grad(w, bt + w.us(2, 5))
    w.op("autograd::engine::backward", t - 5000, bt + 5000, MAIN_TID, main)
    return bt + 10_000


def _autograd_function(w: _Writer, t: int, node: tuple, name: str, body) -> int:
    """``evaluate_function: <name>`` > ``<name>`` (where the fwdbwd flow ends) > body."""
    ev_start, ev = t, w.begin()
    fn_start, fn = t + w.us(4, 8), w.begin()
    args = w.backward_node(fn_start, node) if node else ""
    t = body(fn_start + w.us(3, 6)) + w.us(1, 3)
    w.op(name, fn_start, t, BWD_TID, fn, cat="cpu_op", extra=args)
    t += w.us(2, 4)
    w.op(f"autograd::engine::evaluate_function: {name}", ev_start, t, BWD_TID, ev, extra=args)
    return t


def _kernel_op(w: _Writer, t: int, name: str, kernel: str, mu: float, shape: str | None = None,
               stream: int = COMPUTE_STREAM) -> int:
    """An operator that launches one kernel."""
    start, ext = t, w.begin()
    t = w.launch(t + w.us(3, 7), BWD_TID, ext, kernel, w.lognormal_us(mu, 0.2), stream) + w.us(2, 4)
    w.op(name, start, t, BWD_TID, ext, shape=shape)
    return t


def _relu_backward(w: _Writer, t: int, node: tuple) -> int:
    return _autograd_function(w, t, node, "ReluBackward0", lambda t: _kernel_op(
        w, t, "aten::threshold_backward", THRESHOLD_BWD, 2.1))


def _addmm_backward(w: _Writer, t: int, node: tuple) -> int:
    def body(t: int) -> int:
        t = _transpose(w, t, BWD_TID) + w.us(1, 3)
        t = _kernel_op(w, t, "aten::mm", GEMM_BWD, 3.6) + w.us(1, 3)
        t = _kernel_op(w, t, "aten::mm", GEMM_BWD, 3.6, shape="aten::mm.wgrad") + w.us(1, 3)
        return _kernel_op(w, t, "aten::sum", REDUCE, 2.3)

    return _autograd_function(w, t, node, "AddmmBackward0", body)


def _t_backward(w: _Writer, t: int, node: tuple) -> int:
    return _autograd_function(w, t, node, "TBackward0", lambda t: _transpose(w, t, BWD_TID, with_view=False))


def _accumulate_grad(w: _Writer, t: int) -> int:
    return _autograd_function(w, t, (), "torch::autograd::AccumulateGrad", lambda t: _kernel_op(
        w, t, "aten::add_", ADD, 2.2))


def _all_reduce(w: _Writer, t: int) -> int:
    """Gradient all-reduce on the communication stream (with PyTorch's collective args if
    the writer is asked for them: process group name and ranks, sequence number)."""
    start, ext = t, w.begin()
    w.seq += 1
    extra = ""
    if w.collective_args:
        extra = (f'"Collective name": "allreduce", "In msg nelems": 1048576, "Out msg nelems": 1048576, '
                 f'"dtype": "Float", "Group size": {w.world}, "Process Group Name": "0", '
                 f'"Process Group Ranks": "{list(range(w.world))}", "Seq": {w.seq}, ')
    t = w.launch(t + w.us(6, 12), MAIN_TID, ext, ALLREDUCE, w.lognormal_us(4.2, 0.3), COMM_STREAM,
                 extra=", " + extra.rstrip(", ") if extra else "")
    t += w.us(3, 6)
    w.op("record_param_comms", start, t, MAIN_TID, ext, extra=extra)
    return t + w.us(5, 10)


def _optimizer(w: _Writer, t: int) -> int:
    """SGD's step: three multi-tensor kernels on the optimizer stream, after the all-reduce."""
    opt_start, opt = t, w.begin()
    w.stream_free[OPT_STREAM] = max(w.stream_free[OPT_STREAM], w.stream_free[COMM_STREAM])
    for _ in range(3):
        add_start, add = t, w.begin()
        t = w.launch(t + w.us(5, 10), MAIN_TID, add, MULTI_TENSOR, w.lognormal_us(2.8, 0.2), OPT_STREAM)
        t += w.us(3, 6)
        w.op("aten::_foreach_add_", add_start, t, MAIN_TID, add)
        t += w.us(2, 4)
    w.op("Optimizer.step#SGD.step", opt_start, t, MAIN_TID, opt, cat="user_annotation")
    return t


def _synchronize(w: _Writer, t: int) -> int:
    """The main thread waits for the device."""
    t += w.us(3, 6)
    gpu_done = max(w.stream_free.values())
    end = max(t + w.us(2, 4), gpu_done + w.us(1, 3))
    w.corr += 1
    w.runtime("cudaStreamSynchronize", t, end, MAIN_TID, w.ext, w.corr)
    return end + w.us(5, 15)


_EVENTS_PER_LAYER = 65  # forward + backward of one linear + ReLU layer, flows included
_EVENTS_PER_STEP = 32  # the rest of a step: copy, all-reduce, optimizer, sync, annotations


def write_kineto_trace(
    path: str | Path,
    n_events: int,
    *,
    seed: int = 0,
    rank: int = 0,
    layers: int | None = None,
    steps: int | None = None,
    width: int = 1024,
    world_size: int = 8,
    collective_args: bool = False,
    straggle_us: float = 0.0,
    shape: str = "kineto",
) -> int:
    """Write a Kineto-format trace of about ``n_events`` events; returns the exact count.

    Like a real profile, it holds a few steps (``steps``, by default 3 to 20 growing with
    the size) of a model deep enough (``layers``) to fill them. For one rank of a job:
    ``rank`` and ``world_size`` go into ``distributedInfo``; ``collective_args`` writes the
    all-reduce's process group and sequence number as recent PyTorch does; ``straggle_us``
    delays each all-reduce on this rank (a straggler). ``shape="compact"`` writes the
    older, compact shape (:mod:`.compact`). A ``.gz`` path is compressed.
    """
    if shape == "compact":
        return write_compact_trace(path, n_events, seed=seed, rank=rank, layers=layers, steps=steps, width=width,
                                   world_size=world_size, collective_args=collective_args, straggle_us=straggle_us)
    if shape != "kineto":
        raise ValueError(f"unknown trace shape {shape!r} (kineto or compact)")
    rng = random.Random(seed)
    if layers is None:
        steps = steps or min(max(n_events // 50_000, 3), 20)
        layers = max(2, -(-(-(-n_events // steps) - _EVENTS_PER_STEP) // _EVENTS_PER_LAYER))
    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "wb") as out:
        write_header(out, rank, world_size)
        out.write(b'  "traceEvents": [\n')
        w = _Writer(out, rng, width)
        w.collective_args, w.world, w.delay = collective_args, world_size, int(straggle_us * 1000)
        t = T0_NS
        step = 0
        while w.count < n_events:
            t = _step(w, step, t, layers)
            w.flush()
            step += 1
        trailer = trailer_events(T0_NS - 40_000, t)
        write_trailer(out, trailer)
        w.count += len(trailer)
    return w.count
