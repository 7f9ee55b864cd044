"""python -m traces.atrace requests TRACE --spans SPANS.json: files as the emulator (or a
Collector's file exporter) writes them."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from emulator.serving.engine import ServingConfig
from emulator.serving.spans import emit_run, memory_provider, resource_for, write_otlp_json
from emulator.serving.trace import serve
from traces.atrace import write_chrome_trace
from traces.atrace.cli import main

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def serving_files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("serving")
    trace, run = serve(3.0, ServingConfig(problems=frozenset({"throttled"}), seed=4), t0_ns=1_700_000_000_000_000_000)
    with (folder / "trace.json.gz").open("wb") as fh:
        write_chrome_trace(trace, fh, gzip_output=True)
    provider, exporter = memory_provider(resource_for("h", "ENX-1"))
    emit_run(provider.get_tracer("t"), run)
    write_otlp_json(exporter.get_finished_spans(), folder / "spans.jsonl")
    return folder / "trace.json.gz", folder / "spans.jsonl", run


def test_the_table_names_the_slowest_and_why(serving_files, capsys):
    trace, spans, run = serving_files
    assert main(["requests", str(trace), "--spans", str(spans)]) == 0
    out = capsys.readouterr().out
    assert f"{len(run.requests)} requests" in out and "joined by ids (confidence high)" in out
    assert "p99" in out and "device throttled: temperature 92 °C" in out


@pytest.mark.parametrize("mode", ["ids", "time"])
def test_json_in_both_modes(serving_files, capsys, mode):
    trace, spans, run = serving_files
    assert main(["requests", str(trace), "--spans", str(spans), "--json", "--mode", mode]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["join"]["mode"] == mode and data["requests"] == len(run.requests)
    assert data["join"]["max_share_error_ns"] < 1000
    assert len(data["worst"]) == 10 and data["worst"][0]["reason"]


def test_a_bad_spans_file_is_an_error_with_the_line(serving_files, tmp_path, capsys):
    trace, _, _ = serving_files
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"resourceSpans": []}\nnot json\n')
    assert main(["requests", str(trace), "--spans", str(bad)]) == 2
    assert "line 2 is not JSON" in capsys.readouterr().err


def test_runs_as_a_module(serving_files):
    trace, spans, _ = serving_files
    done = subprocess.run([sys.executable, "-m", "traces.atrace", "requests", str(trace), "--spans", str(spans), "--json"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["join"]["mode"] == "ids"
