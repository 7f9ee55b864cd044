"""The compact Kineto shape the generator wrote before issue 21, kept for the benchmark.

``write_kineto_trace(..., shape="compact")`` (:mod:`.kineto`) writes it: one
event per line, times rounded to at most three decimals from 1e6 us (many whole
microseconds), ``ac2g`` launch flows only, operator stacks three deep and few args. Each
step is a ``ProfilerStep#N`` range on the main thread with a forward pass of linear +
activation layers (``aten::linear`` > ``aten::addmm`` > ``cudaLaunchKernel``), a backward
pass on the autograd thread, an optimizer step on a second stream, an all-reduce kernel on
a communication stream, host-to-device copies and a ``cudaStreamSynchronize`` at the end.
Real traces look like :mod:`.kineto`'s default shape instead.
"""

from __future__ import annotations

import gzip
import random
from pathlib import Path

import orjson

from .frame import (
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
    MULTI_TENSOR,
    OPT_STREAM,
    THRESHOLD_BWD,
    write_header,
)


class _Writer:
    def __init__(self, out, rng: random.Random):
        self.out = out
        self.rng = rng
        self.first = True
        self.count = 0
        self.ext = 0
        self.corr = 0
        self.stream_free = {COMPUTE_STREAM: 0.0, OPT_STREAM: 0.0, COMM_STREAM: 0.0}
        self.buf: list[bytes] = []
        self.seq = 0  # collectives issued
        self.collective_args = False  # write PyTorch's collective args on communication
        self.world = 1
        self.delay = 0.0  # extra host time before each all-reduce (a straggler rank)

    def emit(self, event: dict) -> None:
        self.buf.append(orjson.dumps(event))
        self.count += 1
        if len(self.buf) >= 4096:
            self.flush()

    def flush(self) -> None:
        if self.buf:
            self.out.write((b"" if self.first else b",\n") + b",\n".join(self.buf))
            self.first = False
            self.buf = []

    def cpu(self, name: str, ts: float, dur: float, tid: int, cat: str = "cpu_op", **args) -> None:
        self.ext += 1
        a = {"External id": self.ext, **args}
        self.emit({"ph": "X", "cat": cat, "name": name, "pid": CPU_PID, "tid": tid,
                   "ts": round(ts, 3), "dur": round(dur, 3), "args": a})

    def launch(self, ts: float, tid: int, kernel: str, kdur: float, stream: int,
               cat: str = "kernel", call: str = "cudaLaunchKernel", extra: dict | None = None
               ) -> tuple[float, float]:
        """A runtime call at ``ts`` and the device work it starts; returns (call end, kernel end)."""
        self.corr += 1
        c = self.corr
        dur = self.rng.uniform(3.0, 7.0)
        self.emit({"ph": "X", "cat": "cuda_runtime", "name": call, "pid": CPU_PID, "tid": tid,
                   "ts": round(ts, 3), "dur": round(dur, 3),
                   "args": {"External id": self.ext, "cbid": 211, "correlation": c}})
        start = max(ts + dur + self.rng.uniform(2.0, 12.0), self.stream_free[stream])
        self.stream_free[stream] = start + kdur
        args = {"External id": self.ext, "queued": 0, "device": GPU, "context": 1, "stream": stream,
                "correlation": c, "registers per thread": 64, "shared memory": 16384,
                "blocks per SM": 1.2, "warps per SM": 9.6, "grid": [128, 1, 1], "block": [256, 1, 1],
                "est. achieved occupancy %": 25}
        if cat == "gpu_memcpy":
            args = {"device": GPU, "context": 1, "stream": stream, "correlation": c, "bytes": 4 << 20,
                    "memory bandwidth (GB/s)": 12.5}
        args.update(extra or {})
        self.emit({"ph": "X", "cat": cat, "name": kernel, "pid": GPU, "tid": stream,
                   "ts": round(start, 3), "dur": round(kdur, 3), "args": args})
        self.emit({"ph": "s", "id": c, "pid": CPU_PID, "tid": tid, "ts": round(ts, 3),
                   "cat": "ac2g", "name": "ac2g"})
        self.emit({"ph": "f", "id": c, "pid": GPU, "tid": stream, "ts": round(start, 3),
                   "cat": "ac2g", "name": "ac2g", "bp": "e"})
        return ts + dur, start + kdur


def _step(w: _Writer, step: int, t: float, layers: int, width: int) -> float:
    """One training step starting at ``t`` (us); returns the time it ends."""
    step_start = t
    t = _input_copy(w, t + w.rng.uniform(5, 15), width)
    t = _forward(w, t, layers, width)
    t = _backward(w, t + w.rng.uniform(10, 20), layers, width)
    t = _all_reduce(w, t + w.delay)
    t = _optimizer(w, t)
    t = _synchronize(w, t)
    w.cpu(f"ProfilerStep#{step}", step_start, t - step_start, MAIN_TID, cat="user_annotation")
    return t + w.rng.uniform(20, 60)


def _input_copy(w: _Writer, t: float, width: int) -> float:
    r = w.rng
    op_start = t
    t += r.uniform(2, 5)
    t, _ = w.launch(t, MAIN_TID, "Memcpy HtoD (Pageable -> Device)", r.uniform(20, 40), COMPUTE_STREAM,
                    cat="gpu_memcpy", call="cudaMemcpyAsync")
    t += r.uniform(1, 3)
    w.cpu("aten::copy_", op_start, t - op_start, MAIN_TID, **{"Input Dims": [[64, width], [64, width]]})
    return t + r.uniform(3, 8)


def _forward(w: _Writer, t: float, layers: int, width: int) -> float:
    """Linear + ReLU layers: aten::linear > aten::t, aten::addmm > cudaLaunchKernel."""
    r = w.rng
    for _layer in range(layers):
        lin_start = t
        t += r.uniform(2, 4)
        w.cpu("aten::t", t, r.uniform(3, 6), MAIN_TID, **{"Input Dims": [[width, width]]})
        t += r.uniform(6, 9)
        mm_start = t
        t += r.uniform(4, 9)
        t, _ = w.launch(t, MAIN_TID, GEMM, r.lognormvariate(3.6, 0.25), COMPUTE_STREAM)
        t += r.uniform(2, 5)
        w.cpu("aten::addmm", mm_start, t - mm_start, MAIN_TID,
              **{"Input Dims": [[width], [64, width], [width, width]]})
        t += r.uniform(1, 3)
        w.cpu("aten::linear", lin_start, t - lin_start, MAIN_TID,
              **{"Input Dims": [[64, width], [width, width], [width]]})
        t += r.uniform(2, 6)
        relu_start = t
        t += r.uniform(3, 6)
        t, _ = w.launch(t, MAIN_TID, ELEMENTWISE, r.lognormvariate(2.0, 0.2), COMPUTE_STREAM)
        t += r.uniform(1, 3)
        w.cpu("aten::relu", relu_start, t - relu_start, MAIN_TID, **{"Input Dims": [[64, width]]})
        t += r.uniform(2, 6)
    return t


def _backward(w: _Writer, t: float, layers: int, width: int) -> float:
    """The backward pass on the autograd thread while the main thread waits in backward()."""
    r = w.rng
    bt = t
    for _layer in reversed(range(layers)):
        ev_start = bt
        bt += r.uniform(4, 8)
        tb_start = bt
        bt += r.uniform(3, 6)
        bt, _ = w.launch(bt, BWD_TID, THRESHOLD_BWD, r.lognormvariate(2.1, 0.2), COMPUTE_STREAM)
        bt += r.uniform(1, 3)
        w.cpu("aten::threshold_backward", tb_start, bt - tb_start, BWD_TID,
              **{"Input Dims": [[64, width], [64, width], []]})
        bt += r.uniform(3, 6)
        ab_start = bt
        bt += r.uniform(3, 6)
        for _ in range(2):
            mm_start = bt
            bt += r.uniform(3, 7)
            bt, _ = w.launch(bt, BWD_TID, GEMM_BWD, r.lognormvariate(3.6, 0.25), COMPUTE_STREAM)
            bt += r.uniform(2, 4)
            w.cpu("aten::mm", mm_start, bt - mm_start, BWD_TID,
                  **{"Input Dims": [[64, width], [width, width]]})
            bt += r.uniform(1, 3)
        w.cpu("AddmmBackward0", ab_start, bt - ab_start, BWD_TID)
        bt += r.uniform(2, 4)
        w.cpu("autograd::engine::evaluate_function: AddmmBackward0", ev_start, bt - ev_start, BWD_TID)
        bt += r.uniform(2, 5)
    w.cpu("autograd::engine::backward", t - 5, bt - t + 10, MAIN_TID, cat="cpu_op")
    return bt + 10


def _all_reduce(w: _Writer, t: float) -> float:
    """Gradient all-reduce on the communication stream (with PyTorch's collective args if
    the writer is asked for them: process group name and ranks, sequence number)."""
    r = w.rng
    ar_start = t
    t += r.uniform(4, 8)
    w.seq += 1
    extra = {}
    if w.collective_args:
        extra = {"Collective name": "allreduce", "In msg nelems": 1 << 20, "Out msg nelems": 1 << 20,
                 "dtype": "Float", "Group size": w.world, "Process Group Name": "0",
                 "Process Group Ranks": str(list(range(w.world))), "Seq": w.seq}
    t, _ = w.launch(t, MAIN_TID, ALLREDUCE, r.lognormvariate(4.2, 0.3), COMM_STREAM, extra=extra)
    w.cpu("record_param_comms", ar_start, t - ar_start + 2, MAIN_TID, **extra)
    return t + r.uniform(5, 10)


def _optimizer(w: _Writer, t: float) -> float:
    r = w.rng
    opt_start = t
    w.stream_free[OPT_STREAM] = max(w.stream_free[OPT_STREAM], w.stream_free[COMM_STREAM])
    for _ in range(3):
        add_start = t
        t += r.uniform(5, 10)
        t, _ = w.launch(t, MAIN_TID, MULTI_TENSOR, r.lognormvariate(2.8, 0.2), OPT_STREAM)
        t += r.uniform(3, 6)
        w.cpu("aten::_foreach_add_", add_start, t - add_start, MAIN_TID)
        t += r.uniform(2, 4)
    w.cpu("Optimizer.step#SGD.step", opt_start, t - opt_start, MAIN_TID, cat="user_annotation")
    return t


def _synchronize(w: _Writer, t: float) -> float:
    """The main thread waits for the device."""
    r = w.rng
    t += r.uniform(3, 6)
    gpu_done = max(w.stream_free.values())
    sync_end = max(t + r.uniform(2, 4), gpu_done + r.uniform(1, 3))
    w.corr += 1
    w.emit({"ph": "X", "cat": "cuda_runtime", "name": "cudaStreamSynchronize", "pid": CPU_PID,
            "tid": MAIN_TID, "ts": round(t, 3), "dur": round(sync_end - t, 3),
            "args": {"cbid": 131, "correlation": w.corr}})
    return sync_end + r.uniform(5, 15)


_EVENTS_PER_LAYER = 29  # forward + backward of one linear + ReLU layer, flows included


def _write_head(out, rank: int, world_size: int) -> None:
    """The keys Kineto writes before the events (the device, the job), up to the array."""
    write_header(out, rank, world_size)
    out.write(b'  "traceEvents": [\n')


def write_compact_trace(
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
) -> int:
    """Write a Kineto-format trace of about ``n_events`` events; returns the exact count.

    Like a real profile, it holds a few steps (``steps``, by default 3 to 20 growing with
    the size) of a model deep enough (``layers``) to fill them. For one rank of a job:
    ``rank`` and ``world_size`` go into ``distributedInfo``; ``collective_args`` writes the
    all-reduce's process group and sequence number as recent PyTorch does; ``straggle_us``
    delays each all-reduce on this rank (a straggler).
    """
    rng = random.Random(seed)
    if layers is None:
        steps = steps or min(max(n_events // 50_000, 3), 20)
        layers = max(2, -(-(n_events // steps - 40) // _EVENTS_PER_LAYER))
    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "wb") as out:
        _write_head(out, rank, world_size)
        w = _Writer(out, rng)
        w.collective_args, w.world, w.delay = collective_args, world_size, straggle_us
        for pid, tid, name, kind in (
            (CPU_PID, 0, "process_name", "python"),
            (GPU, 0, "process_name", "GPU 0"),
        ):
            w.emit({"ph": "M", "name": name, "pid": pid, "tid": tid, "args": {"name": kind}})
        w.emit({"ph": "M", "name": "process_labels", "pid": GPU, "tid": 0, "args": {"labels": "GPU 0"}})
        for tid, label in ((MAIN_TID, "thread 4242 (python)"), (BWD_TID, "thread 4250 (pt_autograd_0)")):
            w.emit({"ph": "M", "name": "thread_name", "pid": CPU_PID, "tid": tid, "args": {"name": label}})
        for stream in (COMPUTE_STREAM, OPT_STREAM, COMM_STREAM):
            w.emit({"ph": "M", "name": "thread_name", "pid": GPU, "tid": stream,
                    "args": {"name": f"stream {stream}"}})
        t = 1_000_000.0
        step = 0
        while w.count < n_events:
            t = _step(w, step, t, layers, width)
            step += 1
        w.flush()
        out.write(b'\n  ],\n  "traceName": "synthetic",\n  "displayTimeUnit": "ms",\n'
                  b'  "baseTimeNanoseconds": 1700000000000000000\n}\n')
    return w.count
