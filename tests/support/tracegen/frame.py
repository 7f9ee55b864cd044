"""The frame of a synthetic Kineto trace: its processes and threads, the kernels its steps
run, the top-level keys before the events and what Kineto writes after them. Shared by the
generator (:mod:`.kineto`), its former shape (:mod:`.compact`) and its traces with known
problems (:mod:`.problems`)."""

from __future__ import annotations

import orjson

CPU_PID = 4242
MAIN_TID = 4242
BWD_TID = 4250
GPU = 0
COMPUTE_STREAM = 7
OPT_STREAM = 20
COMM_STREAM = 24
STREAMS = (COMPUTE_STREAM, OPT_STREAM, COMM_STREAM)

# The kernels of a step, named as CUDA and PyTorch name them.
GEMM = "ampere_sgemm_128x64_tn"
GEMM_BWD = "ampere_sgemm_64x64_nn"
ELEMENTWISE = "void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::launch_clamp_scalar(at::TensorIteratorBase&, c10::Scalar, c10::Scalar, at::native::detail::ClampLimits)::{lambda()#1}::operator()() const::{lambda()#7}::operator()() const::{lambda(float)#1}, at::detail::Array<char*, 2> >(int, at::native::(anonymous namespace)::launch_clamp_scalar(at::TensorIteratorBase&, c10::Scalar, c10::Scalar, at::native::detail::ClampLimits)::{lambda()#1}::operator()() const::{lambda()#7}::operator()() const::{lambda(float)#1}, at::detail::Array<char*, 2>)"
THRESHOLD_BWD = "void at::native::vectorized_elementwise_kernel<4, at::native::threshold_kernel_impl<float>(at::TensorIteratorBase&, float, float)::{lambda(float, float)#1}, at::detail::Array<char*, 3> >(int, at::native::threshold_kernel_impl<float>(at::TensorIteratorBase&, float, float)::{lambda(float, float)#1}, at::detail::Array<char*, 3>)"
REDUCE = "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::func_wrapper_t<float, at::native::sum_functor<float, float, float>::operator()(at::TensorIterator&)::{lambda(float, float)#1}>, unsigned int, float, 4> >(at::native::ReduceOp<float, at::native::func_wrapper_t<float, at::native::sum_functor<float, float, float>::operator()(at::TensorIterator&)::{lambda(float, float)#1}>, unsigned int, float, 4>)"
ADD = "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3>)"
MULTI_TENSOR = "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::TensorListMetadata<2>, at::native::(anonymous namespace)::BinaryOpListAlphaFunctor<float, 2, 2, 0>, std::plus<float>, float>(at::native::(anonymous namespace)::TensorListMetadata<2>, at::native::(anonymous namespace)::BinaryOpListAlphaFunctor<float, 2, 2, 0>, std::plus<float>, float)"
ALLREDUCE = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"
MEMCPY = "Memcpy HtoD (Pageable -> Device)"


def write_header(out, rank: int, world_size: int, extra: dict | None = None) -> None:
    """The top-level keys before ``traceEvents`` (``extra``: more keys), one per line."""
    header = {
        "schemaVersion": 1,
        "deviceProperties": [
            {"id": 0, "name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": 85045379072,
             "computeMajor": 9, "computeMinor": 0, "maxThreadsPerBlock": 1024,
             "maxThreadsPerMultiprocessor": 2048, "regsPerBlock": 65536,
             "regsPerMultiprocessor": 65536, "warpSize": 32, "sharedMemPerBlock": 49152,
             "sharedMemPerMultiprocessor": 233472, "numSms": 132,
             "sharedMemPerBlockOptin": 232448}
        ],
        "distributedInfo": {"backend": "nccl", "rank": rank, "world_size": world_size, "pg_count": 1,
                            "pg_config": [], "nccl_version": "2.21.5"},
        **(extra or {}),
    }
    out.write(b"{\n")
    for key, value in header.items():
        text = orjson.dumps(value, option=orjson.OPT_INDENT_2).replace(b"\n", b"\n  ")
        out.write(b"  " + orjson.dumps(key) + b": " + text + b",\n")


def trailer_events(t0: int, t1: int, streams: tuple[int, ...] = STREAMS) -> list[dict]:
    """What Kineto writes after the events: the profiler's span, process and thread names."""
    ts = t0 / 1000
    meta = [
        {"name": "process_name", "ph": "M", "ts": ts, "pid": CPU_PID, "tid": 0, "args": {"name": "python3.10"}},
        {"name": "process_labels", "ph": "M", "ts": ts, "pid": CPU_PID, "tid": 0, "args": {"labels": "CPU"}},
        {"name": "process_sort_index", "ph": "M", "ts": ts, "pid": CPU_PID, "tid": 0, "args": {"sort_index": CPU_PID}},
        {"name": "process_name", "ph": "M", "ts": ts, "pid": GPU, "tid": 0, "args": {"name": "python3.10"}},
        {"name": "process_labels", "ph": "M", "ts": ts, "pid": GPU, "tid": 0, "args": {"labels": f"GPU {GPU}"}},
        {"name": "process_sort_index", "ph": "M", "ts": ts, "pid": GPU, "tid": 0, "args": {"sort_index": 16777216}},
    ]
    for stream in streams:
        meta.append({"name": "thread_name", "ph": "M", "ts": ts, "pid": GPU, "tid": stream,
                     "args": {"name": f"stream {stream}"}})
    for tid, label in ((MAIN_TID, "thread 4242 (python)"), (BWD_TID, "thread 4250 (pt_autograd_0)")):
        meta.append({"name": "thread_name", "ph": "M", "ts": ts, "pid": CPU_PID, "tid": tid, "args": {"name": label}})
        meta.append({"name": "thread_sort_index", "ph": "M", "ts": ts, "pid": CPU_PID, "tid": tid,
                     "args": {"sort_index": tid}})
    meta += [
        {"ph": "X", "cat": "Trace", "ts": ts, "dur": (t1 - t0) / 1000, "pid": "Spans", "tid": "PyTorch Profiler",
         "name": "PyTorch Profiler (0)", "args": {"Op count": 0}},
        {"name": "process_sort_index", "ph": "M", "ts": ts, "pid": "Spans", "tid": 0, "args": {"sort_index": 536870912}},
        {"name": "Iteration Start: PyTorch Profiler", "ph": "i", "s": "g", "pid": "Traces",
         "tid": "Trace PyTorch Profiler", "ts": ts},
        {"name": "Record Window End", "ph": "i", "s": "g", "pid": "", "tid": "", "ts": t1 / 1000},
    ]
    return meta


def write_trailer(out, events: list[dict]) -> None:
    out.write(b",\n" + b",\n".join(b"  " + orjson.dumps(e) for e in events))
    out.write(b'\n  ],\n  "traceName": "synthetic",\n  "displayTimeUnit": "ms",\n'
              b'  "baseTimeNanoseconds": 1700000000000000000\n}\n')
