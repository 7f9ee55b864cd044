"""Host waits of every kind, and traces without a device, on traces built event by event:
the advisor names the wait, its kind and the operator and Python frame that issued it, and
a CPU-only run gets its hot operators (with their shapes) rather than "host-bound"."""

from __future__ import annotations

import pytest

from tests.traces.atrace.analysis.known_answers import US, _Loop
from traces.atrace import TraceBuilder, advise
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


def _cpu_only():
    """Two threads: the main one runs aten::mm (the hot operator) and aten::add in a Python
    frame after a data-loader fetch; a worker thread runs a little aten::mm too."""
    b = TraceBuilder(source="kineto")
    main = b.track(1, 1, process_name="python", thread_name="thread 1 (python)")
    worker = b.track(1, 2, process_name="python", thread_name="thread 2")
    t = 0
    for k in range(STEPS):
        start = t
        b.add("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", t, 300 * US, main,
              kind=Kind.ANNOTATION, cat="user_annotation")
        t += 300 * US
        b.add("train.py(12): forward", t, 1100 * US, main, kind=Kind.PYTHON, cat="python_function")
        b.add("aten::mm", t + 50 * US, 800 * US, main, kind=Kind.HOST_OP, cat="cpu_op",
              args={"Input Dims": [[512, 1024], [1024, 1024]]})
        b.add("aten::add", t + 900 * US, 100 * US, main, kind=Kind.HOST_OP, cat="cpu_op",
              args={"Input Dims": [[512, 1024], [512, 1024]]})
        b.add("aten::mm", t + 100 * US, 100 * US, worker, kind=Kind.HOST_OP, cat="cpu_op",
              args={"Input Dims": [[64, 64], [64, 64]]})
        t += 1100 * US
        b.add(f"ProfilerStep#{k}", start, t - start, main, kind=Kind.ANNOTATION, cat="user_annotation")
        t += 10 * US
    return b.build()


def test_a_cpu_only_run_gets_its_hot_operators_not_host_bound():
    found = advise(_cpu_only())
    assert found.verdict == "cpu-only"
    f = found.rule("cpu_hotspot")
    assert f is not None and found.findings[0] is f
    hot = f.measured["operators"][0]
    assert hot["op"] == "aten::mm" and hot["self_us"] == pytest.approx(STEPS * 900)
    assert hot["shapes"] == [[512, 1024], [1024, 1024]] and hot["threads"] == 2
    assert f.measured["input_share"] == pytest.approx(300 / 1410, abs=0.01)
    # The account adds up to the steps' time: data loader, operators, Python, the gaps.
    parts = {p["part"]: p["time_us"] for p in found.account["parts"]}
    assert sum(parts.values()) == pytest.approx(STEPS * 1400, abs=1)
    assert parts["operators"] == pytest.approx(STEPS * 900) and parts["python"] == pytest.approx(STEPS * 200)
    assert "aten::mm" in f.title and "[[512,1024],[1024,1024]]" in found.account["lines"][1]
    assert f.evidence.events and f.evidence.focus_ns


def test_a_graph_decode_loop_says_how_its_replays_follow_each_other():
    """Recognised from the graph launches: four replays of 200 µs, each after the host's 2 ms
    wait, so none back to back, with the gaps and the host's time between launches."""
    found = advise(_decode_loop("blocking copy"))
    r = found.account["inference"]["graph_replays"]
    assert r["replays"] == STEPS and r["replay_median_us"] == pytest.approx(200)
    assert r["back_to_back_share"] == 0 and r["median_gap_us"] == pytest.approx(2061, abs=1)
    assert r["host_between_launches_median_us"] == pytest.approx(2261, abs=1)
    assert any(line.startswith("Graph replays: 4") for line in found.account["lines"])


def test_kv_cache_writes_and_phases_are_recognised_from_the_events():
    loop = _Loop()
    t = 0
    for k in range(STEPS):
        start = t
        name = "prefill" if k == 0 else "decode"
        t = loop.op(t, "_C_cache_ops::reshape_and_cache_flash", 20 * US, "reshape_and_cache_flash_kernel", 30 * US)
        t = loop.op(t, "aten::mm", 20 * US, "gemm_kernel", 100 * US)
        loop.b.add(f"engine.{name}", start, t - start, loop.host, kind=Kind.ANNOTATION, cat="user_annotation")
        t = loop.sync(t)
        loop.step(k, start, t)
        t += US
    facts = advise(loop.build()).account["inference"]
    assert facts["kv_cache"]["count"] == STEPS and facts["kv_cache"]["time_us"] == pytest.approx(STEPS * 30)
    assert facts["phases"]["prefill"]["count"] == 1 and facts["phases"]["decode"]["count"] == STEPS - 1
    assert "graph_replays" not in facts
