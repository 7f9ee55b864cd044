"""Synthetic Kineto traces with one known problem each, and their clean twins: the
advisor's known answers, in the shape recent PyTorch writes (:mod:`.kineto`).

``write_problem_trace(path, problem, twin=False)`` writes ``steps`` training steps of the
generator's model on a clean base: device-bound (kernel times rescaled so that no three
kernels hold half the device time), the input copy pinned on its own stream, the
all-reduce launched before the backward pass so that it overlaps it. Then one problem:

* ``launch_bound``: all device work 20 times shorter: the device idles while the host
  launches it;
* ``host_sync``: after the forward pass ``aten::item`` (``cudaMemcpyAsync`` device to
  host, ``cudaStreamSynchronize``) then 300 µs of host work on the value;
* ``exposed_communication``: the 1 ms all-reduce after the backward pass, the optimizer
  waiting for it;
* ``input_stall``: each step starts with 600 µs in the data loader;
* ``copies``: the 400 µs input copy from pageable memory, on the compute stream, its call
  returning only when it is done;
* ``kernel_hotspot``: one 8 ms kernel per step.

``twin=True`` writes the same trace (the same random draws) with the problem's cause
switched off and what its fix keeps kept: the sync's host work without the sync, the
all-reduce overlapped, no loader, the copy pinned on its own stream, a 100 µs kernel in
place of the hot one; for ``launch_bound`` the clean base. A problem costs each step the
difference between the two traces' step times (for ``launch_bound``: the time the device
idles in a step). The events written are returned.
"""

from __future__ import annotations

import gzip
import random
from pathlib import Path

from .frame import (
    ADD,
    ALLREDUCE,
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
    REDUCE,
    THRESHOLD_BWD,
    trailer_events,
    write_header,
    write_trailer,
)
from .kineto import (
    _FLOW_F,
    _FLOW_S,
    T0_NS,
    _backward,
    _forward,
    _optimizer,
    _synchronize,
    _Writer,
)

PROBLEMS = ("launch_bound", "host_sync", "exposed_communication", "input_stall", "copies", "kernel_hotspot")
COPY_STREAM = 13
US = 1000
# Per kernel: a factor that gives each kind about 100 µs per layer (the optimizer's three
# multi-tensor kernels as much as a layer's worth each), so that the device bounds the
# step and its time spreads over seven kinds of kernel.
_SCALE = {GEMM: 2.7, ELEMENTWISE: 13.5, THRESHOLD_BWD: 12.0, GEMM_BWD: 1.35, REDUCE: 10.0, ADD: 5.5,
          MULTI_TENSOR: 12.0}
LAUNCH_BOUND_SHRINK = 20
SYNC_WORK_US = 300
ALLREDUCE_US = 1000
LOADER_US = 600
COPY_US = 400
HOT_US = 8000
_HOT = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize256x128x64_hot_attention"


class _ProblemWriter(_Writer):
    """The generator's writer with kernel times rescaled (no extra random draws)."""

    def __init__(self, out, rng: random.Random, width: int, shrink: float):
        super().__init__(out, rng, width)
        self.shrink = shrink

    def launch(self, t, tid, ext, kernel, kdur, stream, **kw):
        kdur = int(kdur * _SCALE.get(kernel, 1.0) / self.shrink)
        return super().launch(t, tid, ext, kernel, kdur, stream, **kw)

    def fixed(self, t: int, ext: int, name: str, dur: int, stream: int, *, call: str = "cudaLaunchKernel",
              cat: str = "kernel", block: bool = False, after: int = 0) -> int:
        """A launch with fixed times (no random draw, so twins stay in step); returns the
        call's end (for ``block``, when the work is done)."""
        self.corr += 1
        c = self.corr
        start = max(t + 9 * US, self.stream_free[stream], after)
        self.stream_free[stream] = start + dur
        end = start + dur + US if block else t + 5 * US
        self.runtime(call, t, end, MAIN_TID, ext, c)
        args = (f'"External id": {ext},      "device": {GPU}, "context": 1,      "stream": {stream}, '
                f'"correlation": {c}' + (', "bytes": 67108864' if cat == "gpu_memcpy" else ""))
        dev = self.device
        dev.append((start, -dur, len(dev), (cat, name, stream, dur, args)))
        dev.append((t, 0, len(dev), _FLOW_S % (c, CPU_PID, MAIN_TID, *divmod(t, 1000), "ac2g", "ac2g")))
        dev.append((start, 0, len(dev), _FLOW_F % (c, GPU, stream, *divmod(start, 1000), "ac2g", "ac2g")))
        return end

    def cpu(self, name: str, t: int, dur: int, cat: str = "cpu_op") -> int:
        self.op(name, t, t + dur, MAIN_TID, self.begin(), cat=cat)
        return t + dur


def _step(w: _ProblemWriter, k: int, t: int, layers: int, problem: str | None, on: bool) -> int:
    start, ext = t, w.begin()
    if problem == "input_stall" and on:
        t = _data_loader(w, t)
    t = _input(w, t + w.us(5, 15), pageable=problem == "copies" and on)
    t, nodes = _forward(w, t + w.us(3, 8), layers)
    if problem == "host_sync":
        t = _read_value(w, t, sync=on)
    if problem == "kernel_hotspot":
        op = w.begin()
        t = w.fixed(t + 3 * US, op, _HOT if on else GEMM, (HOT_US if on else 100) * US, COMPUTE_STREAM) + 2 * US
        w.op("aten::bmm", t - 10 * US, t, MAIN_TID, op)
    exposed = problem == "exposed_communication" and on
    if not exposed:
        t = _all_reduce(w, t, after=0)
    t = _backward(w, t + w.us(10, 20), nodes)
    if exposed:
        t = _all_reduce(w, t, after=w.stream_free[COMPUTE_STREAM])
    # The optimizer needs the gradients: its stream waits for the backward pass (and, in
    # the generator's optimizer, for the all-reduce).
    w.stream_free[OPT_STREAM] = max(w.stream_free[OPT_STREAM], w.stream_free[COMPUTE_STREAM])
    t = _optimizer(w, t)
    t = _synchronize(w, t)
    w.op(f"ProfilerStep#{k}", start, t, MAIN_TID, ext, cat="user_annotation")
    return t + w.us(20, 60)


def _data_loader(w: _ProblemWriter, t: int) -> int:
    w.op("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", t, t + LOADER_US * US, MAIN_TID,
         w.begin(), cat="user_annotation")
    w.cpu("aten::stack", t + 100 * US, 400 * US)
    return t + LOADER_US * US


def _input(w: _ProblemWriter, t: int, *, pageable: bool) -> int:
    """aten::to > aten::copy_ > cudaMemcpyAsync: pinned on the copy stream, or pageable on
    the compute stream (the call returns when the copy is done)."""
    to, cp = w.begin(), w.begin()
    name = "Memcpy HtoD (Pageable -> Device)" if pageable else "Memcpy HtoD (Pinned -> Device)"
    end = w.fixed(t + 4 * US, cp, name, int(COPY_US * US / w.shrink), COMPUTE_STREAM if pageable else COPY_STREAM,
                  call="cudaMemcpyAsync", cat="gpu_memcpy", block=pageable) + 2 * US
    w.op("aten::copy_", t + 2 * US, end, MAIN_TID, cp)
    w.op("aten::to", t, end + US, MAIN_TID, to)
    return end + 5 * US


def _read_value(w: _ProblemWriter, t: int, *, sync: bool) -> int:
    """``aten::item``: copy a value to the host and wait for it; then work on it. Without
    the sync (the twin) the copy is queued and the host goes on."""
    item, local = w.begin(), w.begin()
    end = w.fixed(t + 4 * US, local, "Memcpy DtoH (Device -> Pinned)", 2 * US, COMPUTE_STREAM,
                  call="cudaMemcpyAsync", cat="gpu_memcpy")
    if sync:
        done = max(end + 2 * US, w.stream_free[COMPUTE_STREAM] + US)
        w.corr += 1
        w.runtime("cudaStreamSynchronize", end + US, done, MAIN_TID, local, w.corr)
        end = done
    w.op("aten::_local_scalar_dense", t + 2 * US, end + US, MAIN_TID, local)
    w.op("aten::item" if sync else "aten::copy_", t, end + 2 * US, MAIN_TID, item)
    return w.cpu("aten::cumsum", end + 4 * US, SYNC_WORK_US * US) + 2 * US


def _all_reduce(w: _ProblemWriter, t: int, *, after: int) -> int:
    ext = w.begin()
    end = w.fixed(t + 4 * US, ext, ALLREDUCE, int(ALLREDUCE_US * US / w.shrink), COMM_STREAM, after=after)
    w.op("record_param_comms", t, end + 2 * US, MAIN_TID, ext)
    return end + 5 * US


def write_problem_trace(path: str | Path, problem: str | None, *, twin: bool = False, steps: int = 4,
                        layers: int = 6, seed: int = 0, width: int = 1024) -> int:
    """Write ``steps`` steps with ``problem`` (None: the clean base), or its twin."""
    if problem is not None and problem not in PROBLEMS:
        raise ValueError(f"unknown problem {problem!r}; known: {', '.join(PROBLEMS)}")
    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    shrink = LAUNCH_BOUND_SHRINK if problem == "launch_bound" and not twin else 1
    with opener(path, "wb") as out:
        write_header(out, 0, 1)
        out.write(b'  "traceEvents": [\n')
        w = _ProblemWriter(out, random.Random(seed), width, shrink)
        w.stream_free[COPY_STREAM] = 0
        t = T0_NS
        for k in range(steps):
            t = _step(w, k, t, layers, problem, on=not twin)
            w.flush()
        trailer = trailer_events(T0_NS - 40_000, t, (COMPUTE_STREAM, COPY_STREAM, OPT_STREAM, COMM_STREAM))
        write_trailer(out, trailer)
        return w.count + len(trailer)
