"""``python -m emulator fit`` / ``whatif``: what they print of the model, its errors and its fallbacks."""

from __future__ import annotations

import orjson

from emulator.__main__ import main
from emulator.perf import model as perf_model
from emulator.perf.fitting import report_text
from fleet.asimov.loader import SPECS_DIR
from tests.support.traces import real_trace
from traces.atrace import read_trace
from traces.atrace.analysis.kernel_scoring import fit_traces


def test_the_report_gives_both_splits_both_errors_and_the_fallbacks():
    trace = read_trace(real_trace("a100_alexnet_train.json.gz"))
    report = fit_traces({"a100": trace})
    text = report_text(report, "gpu")
    assert "curve err" in text and "family err" in text
    assert "by time (fitted on each trace's first half" in text
    assert "    by time: " in text
    # the A100 trace records no shapes: its held-out convolutions fall back, and say why
    assert report.fallbacks.get("tile rate", 0) > 0 and report.fallbacks.get("template median", 0) > 0
    assert "fell back (" in text and "no size recorded" in text and "macro tile" in text


def test_fit_json_carries_the_families_and_whatif_the_models_error(tmp_path, capsys, monkeypatch):
    trace = real_trace("h100_bert_infer.json.gz")
    assert main(["fit", str(trace), "--json"]) == 0
    data = orjson.loads(capsys.readouterr().out)
    assert data["families"]["curves"] and data["by_time_error"] is not None
    assert data["model"]["gemm"]["error"] <= 0.15 and data["model"]["gemm"]["family_error"] <= 0.15
    spec = tmp_path / "gpu.asimov"
    spec.write_text((SPECS_DIR / "gpu.asimov").read_text())
    assert main(["fit", str(trace), "--write", "--spec", str(spec)]) == 0
    capsys.readouterr()
    monkeypatch.setenv("ASIMOV_SPEC_DIRS", str(tmp_path))
    perf_model.forget()
    monkeypatch.setattr(perf_model, "_CACHE", {})  # and none left behind for the next test
    assert main(["whatif", str(trace), "--on", "gpu"]) == 0
    out = capsys.readouterr().out
    assert "model error" in out and "fell back" in out
    gemm = next(line for line in out.splitlines() if line.startswith("gemm"))
    assert "%" in gemm  # the class's held-out error beside its prediction


def test_a_small_trace_is_reported_as_scored_leave_one_out():
    trace = read_trace(real_trace("torch_compile_triton.json.gz"))
    report = fit_traces({"triton": trace})
    text = report_text(report, "gpu")
    assert "held out: leave-one-out over 12 kernels" in text
    assert "a model of every kernel before it" in text
    assert report.per_trace["triton"]["held_out"] == 12 and report.to_dict()["held_out"] == report.scheme
