"""Kernel performance models fitted from traces: classes, sizes, the fit and its held-out error."""

from __future__ import annotations

import math

import numpy as np
import orjson
import pytest

from tests.support.traces import real_trace
from traces.atrace import cli, read_trace
from traces.atrace.analysis.kernel_model import (
    HOLD_OUT_EVERY,
    fit,
    fit_traces,
    kernels_of,
    predict,
    predict_trace,
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


def test_every_fifth_kernel_is_held_out_in_start_order():
    kernels = kernels_of(_curve_trace(4.0, 50.0, [300] * 23))
    fitted, held = split(kernels)
    assert (len(fitted), len(held)) == (19, 4)
    assert HOLD_OUT_EVERY == 5


@pytest.mark.parametrize("name", ["h100_bert_infer.json.gz", "mi300_qwen_infer.json.gz"])
def test_fit_on_real_traces_predicts_held_out_kernels(name):
    trace = read_trace(real_trace(name))
    kernels = kernels_of(trace)
    report = fit_traces({name: trace})
    # The bound, computed here: the kernels the fit never saw, predicted by its model.
    _, held = split(kernels)
    pred = predict(report.model, held, report.detail)
    ape = np.abs(pred - held.dur_us) / held.dur_us
    assert np.isfinite(ape).all()
    assert float(np.median(ape)) <= BOUND
    assert report.error == pytest.approx(float(np.median(ape)))
    for cls in set(held.cls.tolist()):
        mask = held.cls == cls
        if mask.sum() >= 3:  # a median of one or two kernels says little
            assert float(np.median(ape[mask])) <= BOUND, cls
    assert report.per_trace[name]["held_out"] == len(held)
    assert report.model["gemm"]["tflops"] > 10  # a real accelerator's GEMMs


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
