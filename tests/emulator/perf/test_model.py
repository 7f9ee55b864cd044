"""Fitted performance models in the emulator: `python -m emulator fit` writes one into a spec,
workloads follow it, and types without one behave exactly as before."""

from __future__ import annotations

import hashlib
import shutil

import pytest

from emulator.__main__ import main
from emulator.perf import model as perf_model
from emulator.workloads.graph import WORKLOADS, op_time_us, profile_for
from emulator.workloads.tracing import capture
from fleet.asimov.compiler import compile_file
from fleet.asimov.loader import SPECS_DIR
from fleet.asimov.performance import with_performance
from tests.support.traces import real_trace

MODEL = {
    "gemm": {"latency_us": 5.0, "tflops": 120.0, "gbps": 2000.0},
    "elementwise": {"latency_us": 1.7, "tflops": 2.0, "gbps": 900.0},
    "memory": {"latency_us": 2.0, "gbps": 20.0},
}
# Captures of the code before fitted models existed (same seed, same arguments).
BEFORE = {"gpu": (1219, "15120707569e3c6b"), "inference": (5762, "284736544038e276"), "video": (83, "e65e9968c6235cb4")}


@pytest.fixture(autouse=True)
def fresh_models(monkeypatch):
    monkeypatch.delenv("ASIMOV_SPEC_DIRS", raising=False)
    perf_model.forget()
    yield
    perf_model.forget()


@pytest.fixture
def fitted_gpu(tmp_path, monkeypatch):
    spec = tmp_path / "gpu.asimov"
    spec.write_text(with_performance((SPECS_DIR / "gpu.asimov").read_text(), MODEL, "test"))
    monkeypatch.setenv("ASIMOV_SPEC_DIRS", str(tmp_path))
    perf_model.forget()
    return spec


def _digest(trace) -> str:
    return hashlib.sha256(trace.ts.tobytes() + trace.dur.tobytes() + trace.name.tobytes()).hexdigest()[:16]


@pytest.mark.parametrize("device_type", sorted(BEFORE))
def test_without_a_model_the_same_seed_gives_the_same_trace_as_before(device_type):
    assert perf_model.model_for(device_type) is None
    trace = capture(device_type, 0.02, seed=7, sw_version="2.1", faults=["overheat"])
    assert (len(trace), _digest(trace)) == BEFORE[device_type]


def test_without_a_model_operator_times_are_the_cost_profile():
    node = next(n for n in WORKLOADS["transformer"].nodes if n.name == "ffn.intermediate")
    p = profile_for("gpu")
    roofline = p.launch_us + max(node.flops / (p.peak_tflops * 1e6 * p.efficiency_for("linear")),
                                 node.bytes / (p.mem_gbps * 1e3))
    assert op_time_us(node, "gpu") == pytest.approx(roofline)


def test_a_fitted_type_takes_operator_times_from_its_model(fitted_gpu):
    assert perf_model.model_for("gpu") == MODEL
    nodes = {n.name: n for n in WORKLOADS["transformer"].nodes}
    ffn = nodes["ffn.intermediate"]
    assert op_time_us(ffn, "gpu") == pytest.approx(5.0 + ffn.flops / 120e6 + ffn.bytes / 2000e3)
    gelu = nodes["ffn.gelu"]  # elementwise: its elements, as the fit counts them, not its 8 FLOPs each
    elements = 8 * 128 * 3072  # batch, sequence, FFN width
    assert gelu.flops == 8 * elements
    assert op_time_us(gelu, "gpu") == pytest.approx(1.7 + elements / 2e6 + gelu.bytes / 900e3)
    assert perf_model.node_size(gelu, "elementwise") == (elements, gelu.bytes)
    h2d = nodes["h2d_hidden_states"]
    assert op_time_us(h2d, "gpu") == pytest.approx(2.0 + h2d.bytes / 20e3)
    # older software is still slower on top of the model (gpu 1.0: softmax x2 -- not in the model)
    assert op_time_us(ffn, "gpu", "2.1") == op_time_us(ffn, "gpu")
    assert op_time_us(nodes["attention.scores_bmm"], "gpu", "2.1") == pytest.approx(
        2.5 * op_time_us(nodes["attention.scores_bmm"], "gpu"))


def test_a_fitted_types_workload_kernels_follow_the_model(fitted_gpu, monkeypatch):
    fitted = capture("gpu", 0.01, seed=3)
    monkeypatch.delenv("ASIMOV_SPEC_DIRS")
    perf_model.forget()
    plain = capture("gpu", 0.01, seed=3)
    nodes = {n.name: n for n in WORKLOADS["transformer"].nodes}
    checked = 0
    for i in range(len(fitted)):
        e = fitted.event(i)
        node = nodes.get(e["name"])
        if node is None or e["kind"] not in ("kernel", "memcpy"):
            continue
        cls = perf_model.op_class(node.op_type, node.kind)
        if cls in MODEL:
            ratio = e["dur_us"] / perf_model.curve_us(MODEL[cls], *perf_model.node_size(node, cls))
            assert 0.949 <= ratio <= 1.081, (e["name"], ratio)  # the tracer's seeded jitter
            checked += 1
    assert checked > 20
    # a class the model lacks (softmax, layer norm) keeps the cost profile's times
    reductions = [i for i in range(len(plain)) if plain.event(i)["name"] == "attention.softmax"]
    assert reductions
    assert [fitted.event(i)["dur_us"] for i in reductions[:5]] == [plain.event(i)["dur_us"] for i in reductions[:5]]


def test_fit_command_writes_the_model_into_the_spec_and_whatif_reads_it(tmp_path, monkeypatch, capsys):
    spec = tmp_path / "gpu.asimov"
    shutil.copy(SPECS_DIR / "gpu.asimov", spec)
    trace = real_trace("h100_bert_infer.json.gz")
    assert main(["fit", str(trace), "--type", "gpu", "--write", "--spec", str(spec)]) == 0
    out = capsys.readouterr().out
    assert "bandwidth-latency curve" in out and "held-out error" in out and f"into {spec}" in out
    model = compile_file(spec).performance
    assert {"gemm", "elementwise", "reduction"} <= set(model)
    assert model["gemm"]["error"] <= 0.15
    monkeypatch.setenv("ASIMOV_SPEC_DIRS", str(tmp_path))
    assert main(["whatif", str(real_trace("mi300_qwen_infer.json.gz")), "--on", "gpu"]) == 0
    out = capsys.readouterr().out
    assert "What if mi300_qwen_infer.json.gz ran on gpu" in out
    assert out.count("\n") >= 5 and "gemm" in out


def test_fit_command_refuses_a_bad_trace_and_leaves_the_spec(tmp_path):
    spec = tmp_path / "gpu.asimov"
    shutil.copy(SPECS_DIR / "gpu.asimov", spec)
    bad = tmp_path / "broken.json"
    bad.write_text('{"traceEvents": [')
    with pytest.raises(SystemExit, match="cannot read .*broken.json"):
        main(["fit", str(bad), "--type", "gpu", "--write", "--spec", str(spec)])
    assert spec.read_text() == (SPECS_DIR / "gpu.asimov").read_text()


def test_whatif_on_a_type_without_a_model_says_how_to_fit_one():
    with pytest.raises(SystemExit, match="no fitted performance model"):
        main(["whatif", str(real_trace("h100_bert_infer.json.gz")), "--on", "gpu"])
