"""Traces with one known problem each, and their clean twin, built event by event.

Every trace is a few steps (``ProfilerStep#N``) of a Kineto-shaped loop: a host thread
running operators that launch kernels (``cudaLaunchKernel`` with correlation ids) on a
compute stream, an input copy on a copy stream, a ``cudaStreamSynchronize`` at the end of
the step. The clean step is device-bound (40 µs kernels launched every 10 µs, eight kernel
names of equal weight). Each problem changes one thing, by a size the test knows
(``Case.injected_ns``: the time per step the problem costs, which the advisor's saving
must match within 10 %):

* ``launch_bound``: 2 µs kernels: the device idles while the host launches them
  (injected: N × (host time per operator - kernel time));
* ``host_sync``: an ``aten::item`` in the middle of the step waits for the device, then
  the host works 300 µs before launching again (injected: those 300 µs);
* ``exposed_communication``: a 1 ms all-reduce after the forward pass that the optimizer
  waits for (injected: 1 ms); the clean twin runs it during the forward pass;
* ``input_stall``: 600 µs in the data loader at the start of each step;
* ``copies``: a 400 µs pageable input copy on the compute stream (the host waits in it);
* ``kernel_hotspot``: one kernel of 6 ms per step (injected: 6 ms);
* ``graph_replays``: steps that replay a CUDA graph of 50 kernels after 500 µs of host
  work (injected: 500 µs); the clean twin's host keeps ahead of its replays;
* a job of four ranks where rank 2 starts each step 500 µs late (``straggler``).
"""

from __future__ import annotations

from dataclasses import dataclass

from traces.atrace import TraceBuilder
from traces.atrace.model.trace import Kind, Trace

US = 1000
N_OPS = 100
HOST_OP_US = 10
KERNEL_US = 40
STEPS = 4
KERNELS = [f"sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize{k}x128x64" for k in range(8)]
PROBLEMS = ("launch_bound", "host_sync", "exposed_communication", "input_stall", "copies",
            "kernel_hotspot", "graph_replays")


@dataclass
class Case:
    trace: Trace
    injected_ns: int  # per step


class _Loop:
    """One host thread, a compute, a copy and a communication stream on device 0."""

    def __init__(self, rank: int = 0):
        b = self.b = TraceBuilder(source="kineto")
        b.meta.update({"rank": rank, "baseTimeNanoseconds": 0})
        self.host = b.track(100, 100, process_name="python", thread_name="thread 100 (python)")
        self.compute = b.track(0, 7, process_name="GPU 0", thread_name="stream 7", is_device=True, device=0, stream=7)
        self.copy = b.track(0, 13, process_name="GPU 0", thread_name="stream 13", is_device=True, device=0, stream=13)
        self.comm = b.track(0, 20, process_name="GPU 0", thread_name="stream 20", is_device=True, device=0, stream=20)
        self.free = {self.compute: 0, self.copy: 0, self.comm: 0}
        self.corr = 0
        self.ext = 0

    def launch(self, t: int, name: str, dur: int, stream: int, *, call: str = "cudaLaunchKernel",
               kind: Kind = Kind.KERNEL, cat: str = "kernel", after: int = 0, block: bool = False,
               args: dict | None = None) -> tuple[int, int]:
        """A launch call at ``t`` and its device work; returns (call end, work end)."""
        self.corr += 1
        start = max(t + 6 * US, self.free[stream], after)
        end = start + dur
        self.free[stream] = end
        call_end = max(t + 4 * US, end + US) if block else t + 4 * US
        self.b.add(call, t, call_end - t, self.host, kind=Kind.RUNTIME, cat="cuda_runtime", corr=self.corr,
                   args={"correlation": self.corr})
        self.b.add(name, start, dur, stream, kind=kind, cat=cat, corr=self.corr,
                   args={"correlation": self.corr, "stream": 7, **(args or {})})
        return call_end, end

    def op(self, t: int, name: str, dur: int, kernel: str | None = None, kdur: int = 0, stream: int | None = None,
           **kw) -> int:
        """A framework operator at ``t`` (launching ``kernel`` 3 µs in); returns its end."""
        self.ext += 1
        end = t + dur
        if kernel is not None:
            call_end, _ = self.launch(t + 3 * US, kernel, kdur, stream if stream is not None else self.compute, **kw)
            end = max(end, call_end + 2 * US)
        self.b.add(name, t, end - t, self.host, kind=Kind.HOST_OP, cat="cpu_op", ext=self.ext)
        return end

    def device_done(self) -> int:
        return max(self.free.values())

    def sync(self, t: int, name: str = "cudaStreamSynchronize") -> int:
        end = max(t + 2 * US, self.device_done() + US)
        self.b.add(name, t, end - t, self.host, kind=Kind.RUNTIME, cat="cuda_runtime")
        return end

    def step(self, k: int, start: int, end: int) -> None:
        self.b.add(f"ProfilerStep#{k}", start, end - start, self.host, kind=Kind.ANNOTATION, cat="user_annotation")

    def build(self) -> Trace:
        return self.b.build()


def _input_copy(loop: _Loop, t: int, pageable: bool = False, dur_us: int = 20) -> int:
    if pageable:
        return loop.op(t, "aten::copy_", 10 * US, "Memcpy HtoD (Pageable -> Device)", dur_us * US, loop.compute,
                       call="cudaMemcpyAsync", kind=Kind.MEMCPY, cat="gpu_memcpy", block=True,
                       args={"bytes": 64 << 20})
    return loop.op(t, "aten::copy_", 10 * US, "Memcpy HtoD (Pinned -> Device)", dur_us * US, loop.copy,
                   call="cudaMemcpyAsync", kind=Kind.MEMCPY, cat="gpu_memcpy", args={"bytes": 64 << 20})


def _forward(loop: _Loop, t: int, first: int, last: int, kernel_us: int, hot: dict | None = None) -> int:
    for i in range(first, last):
        kdur = (hot or {}).get(i, kernel_us) * US
        name = "sm90_hot_attention_kernel" if hot and i in hot else KERNELS[i % len(KERNELS)]
        t = loop.op(t, "aten::linear", HOST_OP_US * US, name, kdur)
    return t


def single(problem: str | None) -> Case:
    """A four-step trace with ``problem`` (None: the clean trace)."""
    loop = _Loop()
    t = 0
    injected = 0
    kernel_us = 2 if problem == "launch_bound" else KERNEL_US
    if problem == "launch_bound":
        injected = N_OPS * (HOST_OP_US - kernel_us) * US
    for k in range(STEPS):
        start = t
        if problem == "input_stall":
            loop.b.add("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", t, 600 * US, loop.host,
                        kind=Kind.ANNOTATION, cat="user_annotation")
            loop.op(t + 50 * US, "aten::stack", 400 * US)
            t += 600 * US
            injected = 600 * US
        t = _input_copy(loop, t + 2 * US, pageable=problem == "copies", dur_us=400 if problem == "copies" else 20)
        if problem == "copies":
            injected = 400 * US
        hot = {10: 6000} if problem == "kernel_hotspot" else None
        injected = 6000 * US if hot else injected
        if problem == "host_sync":
            t = _forward(loop, t, 0, N_OPS // 2, kernel_us)
            t = loop.op(t, "aten::item", 0, "Memcpy DtoH (Device -> Pinned)", US, loop.compute,
                        call="cudaMemcpyAsync", kind=Kind.MEMCPY, cat="gpu_memcpy")
            t = _item_sync(loop, t)
            t = loop.op(t, "aten::cumsum", 300 * US)  # host work that needs the value
            injected = 300 * US
            t = _forward(loop, t, N_OPS // 2, N_OPS, kernel_us)
        elif problem in ("exposed_communication", "clean_communication"):
            mid = N_OPS // 2 if problem == "clean_communication" else N_OPS
            t = _forward(loop, t, 0, mid, kernel_us)
            after = 0 if problem == "clean_communication" else loop.free[loop.compute]
            t = loop.op(t, "record_param_comms", 5 * US, "ncclDevKernel_AllReduce_Sum_f32_RING_LL", 1000 * US,
                        loop.comm, after=after, kind=Kind.COMM)
            t = _forward(loop, t, mid, N_OPS, kernel_us)
            for _ in range(4):  # the optimizer waits for the gradients
                t = loop.op(t, "aten::_foreach_add_", HOST_OP_US * US, KERNELS[0], KERNEL_US * US,
                            after=loop.free[loop.comm])
            injected = 1000 * US if problem == "exposed_communication" else 0
        else:
            t = _forward(loop, t, 0, N_OPS, kernel_us, hot)
        t = loop.sync(t + 2 * US)
        loop.step(k, start, t + 5 * US)
        t += 5 * US
    return Case(loop.build(), injected)


def _item_sync(loop: _Loop, t: int) -> int:
    """``aten::item``'s wait: ``aten::_local_scalar_dense`` > ``cudaStreamSynchronize``."""
    end = loop.sync(t + US)
    loop.b.add("aten::_local_scalar_dense", t, end + US - t, loop.host, kind=Kind.HOST_OP, cat="cpu_op")
    loop.b.add("aten::item", t, end + 2 * US - t, loop.host, kind=Kind.HOST_OP, cat="cpu_op")
    return end + 3 * US


def graph_loop(*, host_ahead: bool, link: str = "correlation") -> Case:
    """Steps that replay a CUDA graph of 50 kernels. ``host_ahead``: the host works 50 µs
    per replay of 1 ms (the device stays busy); else 500 µs per replay of 200 µs.

    ``link``: how the replayed kernels name their launch — ``correlation`` (CUPTI: the
    launch's correlation id), ``external`` (the launch's external id, no correlation) or
    ``args`` (a ``graph id`` arg only)."""
    loop = _Loop()
    t = 0
    host_us, kernel_us = (50, 20) if host_ahead else (500, 4)
    for k in range(STEPS):
        start = t
        t = loop.op(t, "aten::argmax", host_us * US)  # sampling on the host
        loop.ext += 1
        loop.corr += 1
        ext, corr = loop.ext, loop.corr
        loop.b.add("cudaGraphLaunch", t, 10 * US, loop.host, kind=Kind.RUNTIME, cat="cuda_runtime", corr=corr,
                   ext=ext, args={"correlation": corr, "External id": ext})
        s = max(t + 8 * US, loop.free[loop.compute])
        for j in range(50):
            args = {"graph id": 1, "graph node id": j} if link == "args" else {}
            loop.b.add(KERNELS[j % 8], s, kernel_us * US, loop.compute, kind=Kind.KERNEL, cat="kernel",
                       corr=corr if link == "correlation" else -1, ext=ext if link == "external" else -1, args=args)
            s += kernel_us * US
        loop.free[loop.compute] = s
        t += 12 * US
        if not host_ahead:
            t = loop.sync(t)
        loop.step(k, start, t + US)
        t += US
    if host_ahead:
        loop.sync(t)
    return Case(loop.build(), 0 if host_ahead else host_us * US)


def straggler_job(*, late_us: int = 500, straggler: int = 2, ranks: int = 4) -> tuple[list[Trace], int]:
    """A job whose rank ``straggler`` starts each step ``late_us`` late (host work while
    its device idles); each step ends in a 40 µs all-reduce after the forward pass, which
    completes on every rank only once the last rank has arrived. Returns the ranks'
    traces and the injected lateness per step."""
    loops = [_Loop(rank=r) for r in range(ranks)]
    t = [0] * ranks
    for k in range(STEPS):
        start = list(t)
        arrive, launched = [], []
        for r, loop in enumerate(loops):
            if r == straggler and late_us:
                t[r] = loop.op(t[r], "aten::cumsum", late_us * US)
            t[r] = _forward(loop, t[r], 0, N_OPS // 2, KERNEL_US)
            launched.append(t[r])
            arrive.append(max(t[r] + 9 * US, loop.free[loop.compute]))
        done = max(arrive) + 40 * US
        for r, loop in enumerate(loops):
            loop.corr += 1
            loop.ext += 1
            call = launched[r] + 3 * US
            loop.b.add("cudaLaunchKernel", call, 4 * US, loop.host, kind=Kind.RUNTIME, cat="cuda_runtime",
                       corr=loop.corr, args={"correlation": loop.corr})
            loop.b.add("ncclDevKernel_AllReduce_Sum_f32_RING_LL", arrive[r], done - arrive[r], loop.comm,
                       kind=Kind.COMM, cat="kernel", corr=loop.corr, args={"correlation": loop.corr})
            loop.b.add("record_param_comms", launched[r], 9 * US, loop.host, kind=Kind.HOST_OP, cat="cpu_op",
                       ext=loop.ext)
            loop.free[loop.comm] = done
            t[r] = loop.sync(launched[r] + 11 * US)
            loop.step(k, start[r], t[r] + 5 * US)
            t[r] += 5 * US
    return [loop.build() for loop in loops], late_us * US


# -- an inference engine's decode loop ---------------------------------------------------------
DECODE_REPLAY_US = 1500  # one decode step's graph: 30 kernels of 50 µs


def decode_loop(*, gap_us: int = 0, kv_us: int = 0, prefill_us: int = 0, call: str = "cudaGraphLaunch",
                blocking_copy_us: int = 0, steps: bool = True, prefill_alone: bool = False) -> Case:
    """Decode steps, each a CUDA/HIP graph replay of 1.5 ms launched by ``call`` inside a
    ``decode`` range, after host scheduling that stays ahead of the device unless ``gap_us``:
    then the host schedules ``gap_us`` longer than the replay runs, and the device idles that
    long between consecutive replays (injected: ``gap_us`` per gap, STEPS - 1 gaps). ``kv_us``: a ``reshape_and_cache``
    kernel of that long on the compute stream after each replay (injected: ``kv_us``).
    ``prefill_us``: every other step also runs a prefill range whose kernels take that long
    (injected: ``prefill_us`` on those steps). ``blocking_copy_us``: the host then reads the
    sampled tokens with a blocking ``hipMemcpyWithStream`` under ``aten::copy_`` that waits
    that long while the device idles (the shape of the issue's ROCm decode trace).
    ``steps=False``: no ``ProfilerStep`` ranges, only the ``decode`` ones; ``prefill_alone``:
    the ``decode`` range starts after the prefill (not batched with it: injected 0)."""
    loop = _Loop()
    t, injected = 0, 0
    host_us = DECODE_REPLAY_US + gap_us if gap_us else 200
    for k in range(STEPS):
        start = t
        t = loop.op(t, "sampler.schedule", host_us * US)  # the engine's scheduling on the host
        if prefill_us and k % 2:
            p0 = t
            t = loop.op(t, "aten::mm", 10 * US, "prefill_attention_kernel", prefill_us * US)
            loop.b.add("prefill", p0, t - p0, loop.host, kind=Kind.ANNOTATION, cat="user_annotation")
            injected += prefill_us * US
        decode_from = t if prefill_alone else start
        t = _graph_launch(loop, t, call)
        if kv_us:
            t = loop.op(t, "_C_cache_ops::reshape_and_cache", 5 * US, "reshape_and_cache_kernel", kv_us * US)
        if blocking_copy_us:
            t = _blocking_read(loop, t, blocking_copy_us)
        loop.b.add("decode", decode_from, t - decode_from, loop.host, kind=Kind.ANNOTATION, cat="user_annotation")
        if steps:
            loop.step(k, start, t + US)
        t += US
    loop.sync(t)
    # The gaps lie between consecutive replays: STEPS - 1 of them.
    injected = 0 if prefill_alone else injected
    injected += gap_us * US * (STEPS - 1) + (kv_us + blocking_copy_us) * US * STEPS
    return Case(loop.build(), injected // STEPS)


def _graph_launch(loop: _Loop, t: int, call: str) -> int:
    loop.corr += 1
    corr = loop.corr
    loop.b.add(call, t, 10 * US, loop.host, kind=Kind.RUNTIME, cat="cuda_runtime", corr=corr,
               args={"correlation": corr})
    s = max(t + 8 * US, loop.free[loop.compute])
    for j in range(30):
        loop.b.add(KERNELS[j % 8], s, 50 * US, loop.compute, kind=Kind.KERNEL, cat="kernel", corr=corr,
                   args={"correlation": corr})
        s += 50 * US
    loop.free[loop.compute] = s
    return t + 12 * US


def _blocking_read(loop: _Loop, t: int, wait_us: int) -> int:
    """``aten::copy_`` > ``hipMemcpyWithStream``: the call returns once the device has finished
    and the copy ran, then the host waits ``wait_us`` more in the call (the device idles)."""
    loop.corr += 1
    done = loop.device_done()
    start = max(t + 6 * US, done)
    loop.b.add("Memcpy DtoH (Device -> Host)", start, 2 * US, loop.compute, kind=Kind.MEMCPY, cat="gpu_memcpy",
               corr=loop.corr, args={"correlation": loop.corr, "bytes": 4096})
    loop.free[loop.compute] = start + 2 * US
    end = start + 2 * US + wait_us * US
    loop.b.add("hipMemcpyWithStream", t + US, end - t - US, loop.host, kind=Kind.RUNTIME, cat="cuda_runtime",
               corr=loop.corr, args={"correlation": loop.corr})
    loop.b.add("aten::copy_", t, end + US - t, loop.host, kind=Kind.HOST_OP, cat="cpu_op")
    return end + 2 * US
