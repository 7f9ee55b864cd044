"""The command line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

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
