"""How well a kernel model predicts kernels its fit never saw: which are held out (every fifth,
the second half, leave-one-out for a small trace), the class-median baseline, and the
held-out errors on every shared real trace."""

from __future__ import annotations

import numpy as np
import pytest

from tests.support.traces import real_trace
from traces.atrace import read_trace
from traces.atrace.analysis.kernel_model import Kernels, kernels_of, predict, predict_how
from traces.atrace.analysis.kernel_scoring import (
    HOLD_OUT_EVERY,
    LEAVE_ONE_OUT_BELOW,
    by_kernel,
    by_time,
    fit_traces,
    split,
)

BOUND = 0.15  # median absolute error of held-out kernel times


def test_every_fifth_kernel_is_held_out_in_start_order():
    kernels = _unique_kernels([float(i) for i in range(1, 24)])
    fitted, held = split(kernels)
    assert (len(fitted), len(held)) == (19, 4)
    assert held.dur_us.tolist() == [5.0, 10.0, 15.0, 20.0] and HOLD_OUT_EVERY == 5


def _unique_kernels(durations: list[float]) -> Kernels:
    """Unsized GEMMs, each of its own family and launch: a model that saw one gives its time
    back exactly (``same launch``); one that did not can only fall back on the class median."""
    n = len(durations)
    return Kernels(np.array(["gemm"] * n), np.full(n, np.nan), np.full(n, np.nan), np.array(durations, float),
                   np.array([f"cublas:gemm_{i}" for i in range(n)], dtype=object),
                   np.array([f"[{i + 1}, 1, 1]|[128, 1, 1]" for i in range(n)], dtype=object))


def test_a_small_trace_predicts_each_kernel_by_a_model_that_did_not_see_it():
    durations = [3.0 * (i + 1) ** 1.5 for i in range(12)]
    kernels = _unique_kernels(durations)
    model, detail, held, scheme = by_kernel({"t": kernels})
    h = held["t"]
    assert scheme == "leave-one-out over 12 kernels" and len(h.kernels) == 12
    assert np.array_equal(h.kernels.dur_us, kernels.dur_us)  # every kernel scored, in order
    for i in range(12):
        others = [d for j, d in enumerate(durations) if j != i]
        assert h.how[i] == "class median" and h.pred[i] == pytest.approx(np.median(others))
    # the model it returns saw every kernel: each one's own launch gives its time back
    pred, how = predict_how(model, kernels, detail)
    assert set(how.tolist()) == {"same launch"} and np.allclose(pred, durations)


def test_a_small_trace_by_time_predicts_each_later_kernel_from_the_kernels_before_it():
    durations = [float(d) for d in (5, 40, 7, 90, 11, 3, 60, 20, 8, 30)]
    held, scheme = by_time({"t": _unique_kernels(durations)})
    h = held["t"]
    assert "every kernel before it" in scheme and len(h.kernels) == 5
    for i, pred in zip(range(5, 10), h.pred):
        assert pred == pytest.approx(np.median(durations[:i]))


def test_a_trace_of_fifty_kernels_or_more_holds_out_every_fifth():
    kernels = _unique_kernels([10.0 + i for i in range(LEAVE_ONE_OUT_BELOW)])
    _, _, held, scheme = by_kernel({"t": kernels})
    assert scheme == "every 5th kernel of each trace" and len(held["t"].kernels) == LEAVE_ONE_OUT_BELOW // 5
    assert np.array_equal(held["t"].kernels.dur_us, split(kernels)[1].dur_us)
    # two traces of thirty: fifty or more in all, the same rule for both
    assert by_kernel({"a": _unique_kernels([1.0] * 30), "b": _unique_kernels([2.0] * 30)})[3].startswith("every")


@pytest.mark.parametrize("name", ["h100_bert_infer.json.gz", "mi300_qwen_infer.json.gz"])
@pytest.mark.slow  # over 1.5 s on 2 cores: in make test, out of make test-fast
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


@pytest.mark.slow  # over 1.5 s on 2 cores: in make test, out of make test-fast
def test_a_trace_that_records_nothing_to_tell_kernels_apart_is_scored_against_its_class_medians():
    """The baseline that knows only a kernel's class (its class's median time in the fit) is
    reported beside the model. On the MI250 trace (16 tiny kernels, most the only one of
    their family) the model is no worse than it; on a trace with sizes it is far better."""
    tiny = fit_traces({"mi250": read_trace(real_trace("mi250_minitoy_train.json.gz"))}).per_trace["mi250"]
    assert tiny["class_medians"] is not None and tiny["error"] <= tiny["class_medians"] + 0.005
    sized = fit_traces({"h100": read_trace(real_trace("h100_bert_infer.json.gz"))}).per_trace["h100"]
    assert sized["error"] < 0.6 * sized["class_medians"]


# Held-out error (median absolute) measured with this model: (by kernel, by time), each
# asserted with a small margin; the bound of the issue is 15 % on a trace that records
# shapes and 25 % on one that does not. mi250 (16 kernels) and the Triton trace (12) are
# scored leave-one-out (every kernel by a model of the others); mi250 misses the bound (tiny
# kernels of 2-22 us, most of a family seen once, as far apart as their class medians make
# them: `test_a_trace_that_records_nothing_to_tell_kernels_apart_...`): its figures are
# asserted as they are.
REAL_FIGURES = {
    "h100_bert_infer": (0.013, 0.034), "mi300_qwen_infer": (0.030, 0.032),
    "sglang_qwen3_prefilldecode": (0.010, 0.012), "vllm_prefilldecode_piecewise": (0.023, 0.020),
    "multirank_sampled_rank0": (0.061, 0.053), "multirank_sampled_rank1": (0.065, 0.066),
    "mtia_rank0": (0.011, 0.013), "a100_alexnet_train": (0.100, 0.028), "ddp_nccl_rank0": (0.025, 0.030),
    "mi250_minitoy_train": (0.291, 0.385), "torch_compile_triton": (0.090, 0.101),
}
MISSES = {"mi250_minitoy_train"}
NO_SHAPES = {"a100_alexnet_train", "ddp_nccl_rank0"}


@pytest.mark.slow  # over 1.5 s on 2 cores: in make test, out of make test-fast
@pytest.mark.parametrize("name", sorted(REAL_FIGURES))
def test_held_out_errors_on_real_traces_by_kernel_and_by_time(name):
    report = fit_traces({name: read_trace(real_trace(f"{name}.json.gz"))})
    t = report.per_trace[name]
    by_kernel, by_time = REAL_FIGURES[name]
    assert t["error"] <= by_kernel * 1.1 + 0.005
    assert t["by_time"]["error"] <= by_time * 1.1 + 0.005
    if t["kernels"] < LEAVE_ONE_OUT_BELOW:  # every kernel scored, by a model of the others
        assert t["held_out"] == t["kernels"] and t["scheme"].startswith("leave-one-out")
    if name not in MISSES:
        bound = 0.25 if name in NO_SHAPES else 0.15
        assert t["error"] <= bound and t["by_time"]["error"] <= bound
        for split_errors in (t, t["by_time"]):  # no class of 20 or more held-out kernels above 40 %
            for cls, e in split_errors["per_class"].items():
                assert e["held_out"] < 20 or e["error"] <= 0.40, cls


def test_two_ranks_of_one_job_each_predicted_by_a_model_of_the_other():
    traces = {n: read_trace(real_trace(f"multirank_sampled_rank{n}.json.gz")) for n in (0, 1)}
    report = fit_traces(traces)
    across = {n: report.per_trace[n]["across"] for n in traces}
    assert across[0]["held_out"] == len(kernels_of(traces[0]))  # every kernel of the trace left out
    # measured: 6.5 % (rank 0 from rank 1) and 5.7 % (rank 1 from rank 0)
    assert across[0]["error"] <= 0.075 and across[1]["error"] <= 0.065
    assert "across" not in fit_traces({0: traces[0]}).per_trace[0]
