"""The command line."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.traces import real_trace
from traces.atrace.cli import main

ROOT = Path(__file__).resolve().parents[3]


def _run(args, capsys):
    code = main([str(a) for a in args])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_summary_table_and_json(gpu_trace, capsys):
    code, out, _ = _run(["summary", gpu_trace, "--top", "5"], capsys)
    assert code == 0 and "Accelerator operators" in out and "ampere_sgemm" in out
    code, out, _ = _run(["summary", gpu_trace, "--json"], capsys)
    data = json.loads(out)
    assert code == 0 and data["trace"]["events"] > 0 and data["breakdown"]["device"]


@pytest.mark.slow  # the recorded PyTorch traces: torch imported and three models profiled
def test_critical_path_and_diff(gpu_trace, torch_traces, capsys):
    code, out, _ = _run(["critical-path", gpu_trace, "--step", "1"], capsys)
    assert code == 0 and "Critical path" in out and "via" in out
    code, out, _ = _run(["diff", torch_traces["mlp"], torch_traces["transformer"], "--json"], capsys)
    data = json.loads(out)
    assert code == 0 and data["rows"] and data["new"]


def test_convert_both_ways(gpu_trace, tmp_path, capsys):
    chakra = tmp_path / "g.chakra.json"
    chrome = tmp_path / "g.json.gz"
    assert _run(["convert", gpu_trace, chakra], capsys)[0] == 0
    assert _run(["convert", gpu_trace, chrome, "--mark-critical-path"], capsys)[0] == 0
    code, out, _ = _run(["summary", chakra, "--json"], capsys)
    assert code == 0 and json.loads(out)["trace"]["source"] == "chakra"
    code, out, _ = _run(["summary", chrome, "--json"], capsys)
    assert code == 0


def test_bad_file_exit_code(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text('{"traceEvents": [{"ph": "X", "ts": 1, "dur": -4, "name": "x"}]}')
    code, _, err = _run(["summary", bad], capsys)
    assert code == 2 and "negative duration" in err


@pytest.mark.parametrize("cmd", [["--help"]])
def test_module_entry_point(cmd):
    proc = subprocess.run([sys.executable, "-m", "traces.atrace", *cmd], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and "summary" in proc.stdout


@pytest.mark.slow  # over 1.5 s on 2 cores: in make test, out of make test-fast
def test_summary_json_is_complete_and_a_cut_table_says_so(capsys):
    from traces.atrace import operator_breakdown, read_trace

    path = real_trace("ddp_nccl_rank0.json.gz")
    trace = read_trace(path)
    n_host = len(operator_breakdown(trace).rows("host"))
    assert n_host > 15
    code, out, _ = _run(["summary", path, "--json"], capsys)
    data = json.loads(out)
    assert code == 0 and len(data["breakdown"]["host"]) == n_host and data["limits"]["complete"]
    assert data["communication"]["split"]["communication"]["share"] > 0.2
    code, out, _ = _run(["summary", path, "--json", "--top", "0"], capsys)
    assert len(json.loads(out)["breakdown"]["host"]) == n_host
    code, out, _ = _run(["summary", path, "--json", "--top", "3"], capsys)
    data = json.loads(out)
    assert len(data["breakdown"]["host"]) == 3 and not data["limits"]["complete"]
    code, out, _ = _run(["summary", path], capsys)
    assert f"(top 15 of {n_host}; --top 0 lists all)" in out
    assert "communication" in out and "allreduce" in out


def test_diff_compares_operators_and_lists_new_and_vanished_as_tables(capsys):

    a = real_trace("h100_bert_infer.json.gz")
    b = real_trace("mi300_qwen_infer.json.gz")
    code, out, _ = _run(["diff", a, b, "--json"], capsys)
    data = json.loads(out)
    assert code == 0 and data["rows"]
    ops = [r["op"] for r in data["rows"]]
    assert not any(".py(" in op for op in ops), "Python frames are not compared by default"
    assert "ProfilerStep" not in ops
    # ROCm and CUDA launches are the same call.
    assert "cudaLaunchKernel" in ops and "hipLaunchKernel" not in ops
    code, out, _ = _run(["diff", a, b, "--json", "--all-kinds"], capsys)
    assert any(".py(" in r["op"] for r in json.loads(out)["rows"])
    code, out, _ = _run(["diff", a, b, "--top", "5"], capsys)
    assert "New in B (" in out and "Gone in B (" in out and "total us" in out


def test_advise_a_trace_as_text_and_json(capsys):
    real = real_trace("h100_bert_infer.json.gz")
    code, out, _ = _run(["advise", real], capsys)
    assert code == 0
    first = out.splitlines()[0]
    assert first.startswith("Host-bound") and "Launch-bound" in first
    assert "1. [high] launch_bound: saves up to" in out and "Evidence: steps ProfilerStep#6" in out
    assert "Next: Launch the step once" in out
    # Times as the page writes them (µs, ms, s by size), windows from the trace's start,
    # and where the time goes under the verdict.
    assert " us" not in out and re.search(r"saves up to [\d.]+ ms \(", out)
    assert re.search(r"from [\d.,]+ (µs|ms) to [\d.,]+ ms after the trace's start", out)
    assert "Where the time goes, over 1 step" in out
    code, out, _ = _run(["advise", real, "--json"], capsys)
    data = json.loads(out)
    assert code == 0 and data["verdict"] == "host-bound"
    assert data["findings"][0]["rule"] == "launch_bound" and data["findings"][0]["evidence"]["events"]


def test_advise_a_job_folder(tmp_path, capsys):
    from tests.traces.atrace.analysis import known_answers as ka
    from traces.atrace import write_chrome_trace

    traces, _ = ka.straggler_job(late_us=500)
    for r, t in enumerate(traces):
        t.meta["distributedInfo"] = {"rank": r, "world_size": len(traces)}
        write_chrome_trace(t, tmp_path / f"rank{r}.json")
    code, out, _ = _run(["advise", tmp_path, "--json"], capsys)
    data = json.loads(out)
    assert code == 0 and data["scope"]["ranks"] == [0, 1, 2, 3]
    straggler = next(f for f in data["findings"] if f["rule"] == "straggler")
    assert straggler["rank"] == 2 and straggler["measured"]["straggler_rank"] == 2
    code, out, _ = _run(["advise", tmp_path], capsys)
    assert code == 0 and "straggler (rank 2)" in out


def test_advise_a_bad_file(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text('{"traceEvents": [{"ph": "X", "ts": 1, "dur": -4, "name": "x"}]}')
    code, _, err = _run(["advise", bad], capsys)
    assert code == 2 and "negative duration" in err
