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


@pytest.mark.parametrize(("name", "grammar", "batch"), [
    ("sglang_qwen3_prefilldecode.json.gz", "execute-sq-sk+sglang-step", 15),
    ("vllm_prefilldecode_piecewise.json.gz", "execute-sq-sk", 46),
])
@pytest.mark.slow  # over 1.5 s on 2 cores: in make test, out of make test-fast
def test_a_real_engine_s_trace_says_its_grammar_join_and_confidence(name, grammar, batch, tmp_path, capsys):
    from tests.support.engine_spans import engine_sdk_spans
    from tests.support.traces import real_trace
    from traces.atrace import read_trace
    from traces.atrace.analysis.requests.steps import find_steps

    path = real_trace(name)
    trace = read_trace(path)
    finished, plan = engine_sdk_spans(trace, find_steps(trace), "vllm")
    write_otlp_json(finished, tmp_path / "spans.jsonl")
    assert main(["requests", str(path), "--spans", str(tmp_path / "spans.jsonl")]) == 0
    out = capsys.readouterr().out
    assert f"{batch} requests over 1 engine steps, read by the step grammar {grammar} (1 step)" in out
    assert "joined by time and phase (confidence high): " in out
    assert "confirm the batch of all 1 checked" in out
    assert "trace clock aligned by its baseTimeNanoseconds" in out
    assert main(["requests", str(path), "--spans", str(tmp_path / "spans.jsonl"), "--json"]) == 0
    join = json.loads(capsys.readouterr().out)["join"]
    assert join["grammars"] == {grammar: 1} and join["pairs"] == batch == len(plan)
    assert join["phases"] == {"attributes": batch} and join["max_share_error_ns"] == 0


def test_a_trace_without_steps_lists_the_grammars_and_one_file_can_add_a_form(serving_files, tmp_path, capsys):
    from traces.atrace import Kind, TraceBuilder

    _, spans, run = serving_files
    b = TraceBuilder()
    host = b.track("engine", "scheduler")
    t0 = min(r.arrival_ns for r in run.requests)
    b.add("forward[n=3]", t0, 10**9, host, kind=Kind.ANNOTATION, cat="user_annotation")
    with (tmp_path / "mine.json.gz").open("wb") as fh:
        write_chrome_trace(b.build(), fh, gzip_output=True)
    assert main(["requests", str(tmp_path / "mine.json.gz"), "--spans", str(spans)]) == 2
    err = capsys.readouterr().err
    assert "no engine steps" in err and "sglang-step (step[EXTEND bs=15 toks=15360])" in err
    (tmp_path / "forms.json").write_text(json.dumps([{"id": "mine", "pattern": r"^forward\[n=(?P<batch>\d+)\]$"}]))
    assert main(["requests", str(tmp_path / "mine.json.gz"), "--spans", str(spans), "--grammars",
                 str(tmp_path / "forms.json"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["join"]["grammars"] == {"mine": 1}
