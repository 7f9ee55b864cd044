"""Kernel performance models fitted from traces: classes, sizes, the fit, families, what-ifs."""

from __future__ import annotations

import math

import numpy as np
import orjson
import pytest

from tests.support.traces import real_trace
from traces.atrace import cli, read_trace
from traces.atrace.analysis.kernel_model import (
    FALLBACK_WHY,
    Kernels,
    detail_from_json,
    fit,
    fit_detail,
    kernels_of,
    model_from_json,
    predict,
    predict_how,
    predict_trace,
)
from traces.atrace.analysis.kernel_scoring import (
    fit_traces,
    split,
)
from traces.atrace.analysis.kernel_sizes import classify, kernel_size
from traces.atrace.model.builder import TraceBuilder
from traces.atrace.model.trace import Kind

BOUND = 0.15  # median absolute error of held-out kernel times


@pytest.mark.parametrize(("kernel", "kind", "op", "cls"), [
    ("ncclDevKernel_AllReduce_Sum_f32_RING_LL", Kind.COMM, "c10d::allreduce_", "communication"),
    ("Memcpy HtoD (Pageable -> Device)", Kind.MEMCPY, "aten::copy_", "memory"),
    ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n", Kind.KERNEL, "aten::addmm", "gemm"),
    ("Cijk_Alik_Bljk_B_BS_BH_Bias_HA_S_SAV", Kind.KERNEL, "aten::mm", "gemm"),
    ("void pytorch_flash::flash_fwd_kernel<...>", Kind.KERNEL, "aten::_flash_attention_forward", "attention"),
    ("sm80_xmma_fprop_implicit_gemm_indexed_tf32", Kind.KERNEL, "aten::cudnn_convolution", "conv"),
    ("void cudnn::ops::nchwToNhwcKernel<float>", Kind.KERNEL, "aten::cudnn_convolution", "elementwise"),
    ("void at::native::reduce_kernel<512, 1>", Kind.KERNEL, "aten::mean", "reduction"),
    ("void at::native::(anonymous)::vectorized_layer_norm_kernel", Kind.KERNEL, None, "reduction"),
    ("my_fused_kernel_42", Kind.KERNEL, "aten::gelu", "elementwise"),
    ("my_fused_kernel_42", Kind.KERNEL, None, "other"),
])
def test_class_comes_from_the_kernel_name_then_its_launching_operator(kernel, kind, op, cls):
    assert classify(kernel, kind, op) == cls


def test_sizes_from_recorded_shapes():
    addmm = {"Input Dims": [[3072], [128, 768], [768, 3072]], "Input type": ["c10::BFloat16"] * 3}
    flops, nbytes = kernel_size("gemm", "gemm", None, "aten::addmm", addmm)
    assert flops == 2 * 128 * 768 * 3072
    assert nbytes == 2 * (3072 + 128 * 768 + 768 * 3072 + 128 * 3072)
    add = {"Input Dims": [[1, 141, 512], [1, 141, 512], []], "Input type": ["float", "float", "Scalar"]}
    assert kernel_size("elementwise", "k", None, "aten::add", add) == (141 * 512, 3 * 141 * 512 * 4)
    assert kernel_size("memory", "Memcpy", {"bytes": 4096}, "aten::copy_", None) == (0.0, 4096.0)
    # no shapes and no launch geometry: unknown
    assert all(math.isnan(v) for v in kernel_size("gemm", "k", {}, "aten::mm", {}))


def _curve_trace(latency_us: float, tflops: float, sizes: list[int]) -> TraceBuilder:
    """GEMM kernels launched by aten::mm whose times follow an exact curve."""
    b = TraceBuilder(source="test")
    host = b.track("host", 1)
    dev = b.track("gpu", 7, is_device=True, device=0, stream=7)
    t = 0
    for i, n in enumerate(sizes):
        dur_us = latency_us + 2.0 * n**3 / (tflops * 1e6)
        b.add("aten::mm", t, 50_000, host, kind=Kind.HOST_OP, cat="cpu_op",
              args={"Input Dims": [[n, n], [n, n]], "Input type": ["float", "float"]})
        b.add("cudaLaunchKernel", t + 1000, 5000, host, kind=Kind.RUNTIME, cat="cuda_runtime", corr=i + 1)
        b.add("ampere_sgemm_128x64_nn", t + 10_000, int(dur_us * 1000), dev, kind=Kind.KERNEL,
              cat="kernel", corr=i + 1)
        t += 10_000 + int(dur_us * 1000) + 60_000
    return b.build()


def test_the_fit_recovers_a_known_curve():
    sizes = [256 + 64 * (i % 29) for i in range(120)]
    trace = _curve_trace(latency_us=4.0, tflops=50.0, sizes=sizes)
    kernels = kernels_of(trace)
    assert set(kernels.cls.tolist()) == {"gemm"} and len(kernels) == 120
    model = fit(split(kernels)[0])
    assert model["gemm"]["latency_us"] == pytest.approx(4.0, rel=0.02)
    assert model["gemm"]["tflops"] == pytest.approx(50.0, rel=0.02)
    assert "gbps" not in model["gemm"]  # a pure compute curve gets no bandwidth term


@pytest.mark.slow  # over 1.5 s on 2 cores: in make test, out of make test-fast
def test_whatif_predicts_each_class_of_another_trace():
    h100 = read_trace(real_trace("h100_bert_infer.json.gz"))
    model = fit_traces({"h100": h100}).model
    mi300 = read_trace(real_trace("mi300_qwen_infer.json.gz"))
    rows = predict_trace(mi300, model)
    assert rows["gemm"]["kernels"] == int((kernels_of(mi300).cls == "gemm").sum())
    assert rows["gemm"]["predicted_us"] > 0
    # the same trace under its own model: close to what it recorded
    own = predict_trace(h100, model)
    assert own["gemm"]["predicted_us"] == pytest.approx(own["gemm"]["recorded_us"], rel=BOUND)


def test_whatif_command_reads_a_fitted_model(tmp_path, capsys):
    h100 = read_trace(real_trace("h100_bert_infer.json.gz"))
    model_file = tmp_path / "fit.json"
    model_file.write_bytes(orjson.dumps(fit_traces({"h100": h100}).to_dict()))
    mi300 = str(real_trace("mi300_qwen_infer.json.gz"))
    assert cli.main(["whatif", mi300, "--model", str(model_file), "--json"]) == 0
    rows = {r["class"]: r for r in orjson.loads(capsys.readouterr().out)["classes"]}
    assert rows["gemm"]["kernels"] == 243 and rows["gemm"]["predicted_us"] > 0
    bad = tmp_path / "bad.json"
    bad.write_text('{"model": {"gemm": {"tflops": 3}}}')
    with pytest.raises(SystemExit, match="class 'gemm' needs a numeric latency_us"):
        cli.main(["whatif", mi300, "--model", str(bad)])


def _two_family_trace(n: int = 60) -> TraceBuilder:
    """Elementwise kernels of two families over sizes: one at 1 TB/s, one (a slow
    gather-like kernel) at a quarter of that; and, every tenth, a GEMM with no shapes."""
    b = TraceBuilder(source="test")
    host = b.track("host", 1)
    dev = b.track("gpu", 7, is_device=True, device=0, stream=7)
    t, corr = 0, 0
    for i in range(n):
        elems = 4096 * (1 + i % 7)
        for name, gbps in (("fast_copy_kernel", 1000.0), ("slow_gather_kernel", 250.0)):
            corr += 1
            dur_us = 2.0 + 8.0 * elems / (gbps * 1e3)
            b.add("aten::add", t, 20_000, host, kind=Kind.HOST_OP, cat="cpu_op",
                  args={"Input Dims": [[elems], [elems]], "Input type": ["float", "float"]})
            b.add("cudaLaunchKernel", t + 1000, 5000, host, kind=Kind.RUNTIME, cat="cuda_runtime", corr=corr)
            b.add(name, t + 10_000, int(dur_us * 1000), dev, kind=Kind.KERNEL, cat="kernel", corr=corr)
            t += 10_000 + int(dur_us * 1000) + 30_000
        if i % 10 == 9:  # no shapes recorded: a GEMM of a family seen once per ten rows
            corr += 1
            b.add("aten::mm", t, 20_000, host, kind=Kind.HOST_OP, cat="cpu_op")
            b.add("cudaLaunchKernel", t + 1000, 5000, host, kind=Kind.RUNTIME, cat="cuda_runtime", corr=corr)
            b.add(f"mystery_gemm_{i}x", t + 10_000, 50_000, dev, kind=Kind.KERNEL, cat="kernel", corr=corr)
            t += 100_000
    return b.build()


def test_each_family_gets_its_own_efficiency_curve():
    kernels = kernels_of(_two_family_trace())
    fitted, held = split(kernels)
    model = fit(fitted)
    detail = fit_detail(model, fitted)
    elementwise = held.cls == "elementwise"
    curves_only = np.abs(predict(model, held) - held.dur_us) / held.dur_us
    by_family, how = predict_how(model, held, detail)
    with_families = np.abs(by_family - held.dur_us) / held.dur_us
    # one curve for both families misses one of them by tens of percent; one per family is exact
    assert np.max(curves_only[elementwise]) > 0.15
    assert np.max(with_families[elementwise]) < 0.02
    assert set(how[elementwise].tolist()) == {"family curve"}


def test_kernels_without_a_size_fall_back_flagged_with_their_reason():
    trace = _two_family_trace()
    report = fit_traces({"t": trace})
    kernels = kernels_of(trace)
    _, held = split(kernels)
    _, how = predict_how(report.model, held, report.detail)
    gemm = held.cls == "gemm"
    assert gemm.any()
    # each GEMM has its own name, no shapes and no launch: its class's median, flagged
    assert set(how[gemm].tolist()) == {"class median"}
    assert report.fallbacks == {"class median": int(gemm.sum())}
    assert report.per_trace["t"]["per_class"]["gemm"]["fallbacks"] == {"class median": int(gemm.sum())}
    assert "not seen in the fit" in FALLBACK_WHY["class median"]
    assert "fallback_why" in report.to_dict() and report.to_dict()["fallback_why"]["class median"]
    rows = predict_trace(trace, report.model, report.detail)
    assert rows["gemm"]["fell_back"] == int((kernels.cls == "gemm").sum())  # family or class median
    assert rows["elementwise"]["fell_back"] == 0 and rows["elementwise"]["error"] is not None


def test_a_class_absent_from_the_fit_takes_its_groups_curve_flagged():
    kernels = kernels_of(_curve_trace(latency_us=4.0, tflops=50.0, sizes=[256 + 64 * i for i in range(20)]))
    model = fit(kernels)
    detail = fit_detail(model, kernels)
    other = Kernels(np.array(["attention"]), np.array([2.0 * 512**3]), np.array([3.0 * 512 * 512 * 4]),
                    np.array([10.0]), np.array(["flash:new_kernel"], dtype=object), np.array([""], dtype=object))
    pred, how = predict_how(model, other, detail)
    assert how.tolist() == ["group curve"] and "group" in FALLBACK_WHY["group curve"]
    assert pred[0] == pytest.approx(4.0 + 2.0 * 512**3 / 50e6, rel=0.02)
    assert np.isnan(predict(model, other)).all()  # the class curves alone have nothing for it


def test_a_class_of_one_kernel_takes_its_groups_curve_at_its_own_level():
    """Many elementwise kernels give the bandwidth group its curve; the one reduction kernel
    ran 3x that curve, so the reduction class predicts 3x the curve at any size."""
    sizes = np.array([4e3 * (i + 1) for i in range(30)])
    cls = np.array(["elementwise"] * 30 + ["reduction"], dtype=object)
    nbytes = np.append(sizes, 6e4)
    flops = nbytes / 8
    dur = 2.0 + nbytes / 1e3  # 2 us and a GB/s... of kB per us
    dur[-1] *= 3.0
    kernels = Kernels(cls, flops, nbytes, dur)
    model = fit(kernels)
    assert model["reduction"]["pooled"] == 1
    other = Kernels(np.array(["reduction"], dtype=object), np.array([1e4]), np.array([8e4]), np.array([1.0]))
    assert predict(model, other)[0] == pytest.approx(3.0 * (2.0 + 80.0), rel=0.05)
    elementwise = Kernels(np.array(["elementwise"], dtype=object), np.array([1e4]), np.array([8e4]), np.array([1.0]))
    assert predict(model, elementwise)[0] == pytest.approx(2.0 + 80.0, rel=0.05)


def test_the_model_and_its_families_round_trip_through_json(tmp_path):
    report = fit_traces({"t": _two_family_trace()})
    data = orjson.loads(orjson.dumps(report.to_dict()))
    detail = detail_from_json(data)
    k = kernels_of(_two_family_trace())
    assert np.allclose(predict(model_from_json(data), k, detail), predict(report.model, k, report.detail), rtol=1e-4)
    with pytest.raises(ValueError, match="families"):
        detail_from_json({"families": {"curves": {"f": ["x", "y"]}}})


def test_an_unsized_kernel_of_a_seen_family_follows_its_time_over_threads():
    def kernels(grids):
        n = len(grids)
        return Kernels(np.array(["gemm"] * n), np.full(n, np.nan), np.full(n, np.nan),
                       np.array([10.0 + g / 8.0 for g in grids]),  # 10 µs + 1 µs per 8 CTAs
                       np.array(["cublas:ampere_sgemm_128x64_nn"] * n, dtype=object),
                       np.array([f"[{g}, 1, 1]|[256, 1, 1]" for g in grids], dtype=object),
                       np.array([g * 256.0 for g in grids]))
    fitted = kernels([8, 16, 64, 256] * 3)
    model = fit(fitted)
    detail = fit_detail(model, fitted)
    new = kernels([128, 16])
    pred, how = predict_how(model, new, detail)
    assert how.tolist() == ["launch curve", "same launch"]
    assert pred[1] == pytest.approx(12.0)
    # between 64 and 256 CTAs (18 and 42 µs), log-log: within a few percent of the 26 µs it took
    assert pred[0] == pytest.approx(26.0, rel=0.1)
    assert "launch curve" not in FALLBACK_WHY  # a prediction from the kernel's own family, not a fallback


def test_an_unseen_unsized_kernel_takes_its_template_then_its_tiles_then_its_class():
    def kernels(families, durations, work):
        n = len(families)
        return Kernels(np.array(["conv"] * n), np.full(n, np.nan), np.full(n, np.nan), np.array(durations, float),
                       np.array(families, dtype=object), np.full(n, "", dtype=object), np.full(n, np.nan),
                       np.array(work, float))
    # convolutions at 40 µs per million output elements of their tiles, and an FFT one
    fitted = kernels(["cudnn:xmma_a", "cudnn:xmma_b", "cudnn:xmma_c", "cudnn:fft<float, 5u>"],
                     [40.0, 80.0, 160.0, 64.0], [1e6, 2e6, 4e6, np.nan])
    model = fit(fitted)
    detail = fit_detail(model, fitted)
    new = kernels(["cudnn:fft<float, 0u>", "cudnn:scudnn_128x64", "cudnn:winograd"], [63.0, 1000.0, 5.0],
                  [np.nan, 25e6, np.nan])
    pred, how = predict_how(model, new, detail)
    assert how.tolist() == ["template median", "tile rate", "class median"]
    assert pred[0] == 64.0 and pred[1] == pytest.approx(1000.0) and pred[2] == pytest.approx(72.0)
    assert {"template median", "tile rate"} <= FALLBACK_WHY.keys()  # flagged as fallbacks, with why
