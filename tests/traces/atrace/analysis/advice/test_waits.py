"""Host waits of every kind, on traces built event by event: the advisor names the wait,
its kind and the operator and Python frame that issued it."""

from __future__ import annotations

import pytest

from tests.traces.atrace.analysis.known_answers import US, _Loop
from traces.atrace import advise
from traces.atrace.model.trace import Kind

STEPS = 4


def _decode_loop(wait: str) -> tuple:
    """A decode loop: each step replays a CUDA/HIP graph of 20 kernels (10 µs each), then
    under a Python frame the host reads the step's token back in a way ``wait`` says, while
    the device idles for 2 ms:

    * ``blocking copy``: ``aten::copy_`` → ``hipMemcpyWithStream`` (synchronous; the copy
      itself is 10 µs at its end);
    * ``scalar read``: ``aten::item`` → ``aten::_local_scalar_dense`` → ``cudaMemcpyAsync``
      that returns only after its device-to-host copy;
    * ``event wait``: ``cudaStreamWaitEvent`` that holds the host."""
    loop = _Loop()
    b, t = loop.b, 0
    for k in range(STEPS):
        start = t
        loop.corr += 1
        b.add("hipGraphLaunch", t, 10 * US, loop.host, kind=Kind.RUNTIME, cat="cuda_runtime", corr=loop.corr,
              args={"correlation": loop.corr})
        s = t + 8 * US
        for j in range(20):
            b.add(f"decode_kernel_{j % 4}", s, 10 * US, loop.compute, kind=Kind.KERNEL, cat="kernel",
                  corr=loop.corr, args={"correlation": loop.corr})
            s += 10 * US
        t = s + 2 * US
        frame_start = t
        if wait == "blocking copy":
            loop.corr += 1
            b.add("aten::copy_", t, 2030 * US, loop.host, kind=Kind.HOST_OP, cat="cpu_op")
            b.add("hipMemcpyWithStream", t + 5 * US, 2020 * US, loop.host, kind=Kind.RUNTIME, cat="cuda_runtime",
                  corr=loop.corr, args={"correlation": loop.corr})
            b.add("Memcpy DtoH (Device -> Host)", t + 2010 * US, 10 * US, loop.copy, kind=Kind.MEMCPY,
                  cat="gpu_memcpy", corr=loop.corr, args={"correlation": loop.corr, "bytes": 8})
        elif wait == "scalar read":
            loop.corr += 1
            b.add("aten::item", t, 2030 * US, loop.host, kind=Kind.HOST_OP, cat="cpu_op")
            b.add("aten::_local_scalar_dense", t + 2 * US, 2026 * US, loop.host, kind=Kind.HOST_OP, cat="cpu_op")
            b.add("cudaMemcpyAsync", t + 5 * US, 2020 * US, loop.host, kind=Kind.RUNTIME, cat="cuda_runtime",
                  corr=loop.corr, args={"correlation": loop.corr})
            b.add("Memcpy DtoH (Device -> Pageable)", t + 2010 * US, 10 * US, loop.copy, kind=Kind.MEMCPY,
                  cat="gpu_memcpy", corr=loop.corr, args={"correlation": loop.corr, "bytes": 8})
        else:
            b.add("cudaStreamWaitEvent", t + 5 * US, 2020 * US, loop.host, kind=Kind.RUNTIME, cat="cuda_runtime")
        t += 2030 * US
        b.add("decode.py(88): sample_next_token", frame_start - US, t - frame_start + 2 * US, loop.host,
              kind=Kind.PYTHON, cat="python_function")
        t += 20 * US
        loop.step(k, start, t)
        t += US
    return loop.build()


@pytest.mark.parametrize(("wait", "call", "operator"), [
    ("blocking copy", "hipMemcpyWithStream", "aten::copy_"),
    ("scalar read", "cudaMemcpyAsync", "aten::_local_scalar_dense"),
    ("event wait", "cudaStreamWaitEvent", ""),
])
def test_each_kind_of_host_wait_is_named_with_its_issuer(wait, call, operator):
    found = advise(_decode_loop(wait))
    f = found.rules and found.findings[0]
    assert f and f.rule == "host_sync", found.summary
    top = f.measured["by_kind"][0]
    assert top["kind"] == wait and top["calls"] == [call] and top["operator"] == operator
    assert top["python_frame"] == "decode.py(88): sample_next_token"
    assert top["count"] == STEPS and top["wait_us"] == pytest.approx(STEPS * 2020, rel=1e-6)
    # What the step would save: the wait, less the 10 µs copy that stays (never more than the wait).
    assert 0.9 * 2010 * US <= f.saving_per_step_ns <= 2020 * US
    assert found.verdict == "host-bound" and found.reason == f.title
    assert "µs" in f.title or "ms" in f.title


