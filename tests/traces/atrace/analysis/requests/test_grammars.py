"""Engine steps as data: the step grammar table read on every real serving trace and on
made-up names of each form; a trace with none says which forms are known and how to add one."""

import json

import pytest

from traces.atrace import Kind, TraceBuilder
from traces.atrace.analysis.requests import grammars
from traces.atrace.analysis.requests.grammars import GrammarError, load, match
from traces.atrace.analysis.requests.joining import (
    RequestJoinError,
    find_steps,
    join,
    requests_from_spans,
)


@pytest.mark.parametrize(("name", "expected"), [
    ("engine_step#12", dict(grammar="asicmon-step", kind="any", batch=-1)),
    ("engine_step#3|req-a:512,req-b:1", dict(grammar="asicmon-step", ids=("req-a", "req-b"), id_tokens=(512, 1))),
    ("step[EXTEND bs=15 toks=15360]", dict(grammar="sglang-step", kind="prefill", batch=15, prefill=15, decode=0,
                                          tokens=15360)),
    ("step[DECODE bs=32]", dict(grammar="sglang-step", kind="decode", batch=32, prefill=0, decode=32, tokens=-1)),
    ("step[MIXED bs=20 toks=4116]", dict(grammar="sglang-step", kind="mixed", batch=20, prefill=-1, decode=-1)),
    ("execute_8192_context_9(sq8155sk8430sqsq7475785sqsk7671310)_generation_37(sq37sk34489sqsq37sqsk34489)",
     dict(grammar="execute-sq-sk", kind="mixed", batch=46, prefill_tokens=8155, decode_tokens=37)),
    ("execute_64_context_0(sq0sk0sqsq0sqsk0)_generation_64(sq64sk9000sqsq64sqsk9000)",
     dict(grammar="execute-sq-sk", kind="decode", batch=64, prefill=0, decode=64)),
    ("execute_context_1(888_788544)_generation_0(0)",
     dict(grammar="execute-legacy", kind="prefill", batch=1, prefill_tokens=888, decode_tokens=0, tokens=888)),
    ("execute_context_2(300_45000)_generation_5(5)",
     dict(grammar="execute-legacy", kind="mixed", batch=7, tokens=305)),
    ("execute_4096_context_2(2x2048)_generation_16()",
     dict(grammar="tracelens-execute", kind="mixed", batch=18, tokens=4096, prefill_tokens=4080)),
])
def test_made_up_names_of_each_form(name, expected):
    info = match(name)
    assert info is not None
    for key, value in expected.items():
        assert getattr(info, key) == value, key


@pytest.mark.parametrize("name", ["ProfilerStep#4", "step#3", "vllm/v1/worker/gpu_model_runner.py(3380): execute_model",
                                  "step[EXTEND bs=x]", "execute_8192_context_9", "engine_stepper", "aten::mm"])
def test_names_that_are_not_steps(name):
    assert match(name) is None


def test_every_example_in_the_table_is_read_by_its_own_grammar():
    table = grammars.grammars()
    assert len({g.id for g in table}) == len(table) >= 5
    for g in table:
        assert g.examples, g.id
        for example in g.examples:
            assert match(example).grammar == g.id, example  # no earlier, broader form takes it


def _training_trace():
    b = TraceBuilder()
    host = b.track("trainer", "main")
    b.add("ProfilerStep#0", 1_000, 5_000, host, kind=Kind.ANNOTATION)
    return b.build()


def test_a_trace_without_steps_lists_the_grammars_known_and_how_to_add_one():
    with pytest.raises(RequestJoinError) as caught:
        join(_training_trace(), requests_from_spans([]))
    message = str(caught.value)
    assert "no engine steps" in message
    for g in grammars.grammars():
        assert g.id in message
    assert "step[EXTEND bs=15 toks=15360]" in message
    assert "traces/atrace/analysis/requests/step_grammars.json" in message and "ATRACE_STEP_GRAMMARS" in message


def test_a_grammar_added_in_a_file_of_one_s_own_is_tried_first(tmp_path, monkeypatch):
    extra = tmp_path / "mine.json"
    extra.write_text(json.dumps({"grammars": [{
        "id": "my-engine", "pattern": r"^fwd\[p=(?P<prefill>\d+) d=(?P<decode>\d+)\]$", "examples": ["fwd[p=2 d=5]"],
    }]}))
    monkeypatch.setenv(grammars.ENV, str(extra))
    info = match("fwd[p=2 d=5]")
    assert (info.grammar, info.kind, info.batch, info.decode_tokens) == ("my-engine", "mixed", 7, 5)
    assert match("step[DECODE bs=4]").grammar == "sglang-step"  # the table's still apply
    b = TraceBuilder()
    b.add("fwd[p=1 d=0]", 1_000, 5_000, b.track("engine", "main"), kind=Kind.ANNOTATION)
    assert find_steps(b.build()).info[0].grammar == "my-engine"


@pytest.mark.parametrize(("entry", "says"), [
    ({"id": "x", "pattern": "("}, "not a regular expression"),
    ({"id": "x", "pattern": "^(?P<size>\\d+)$"}, "unknown groups ['size']"),
    ({"id": "x", "pattern": "^a$", "kind": "both"}, "a kind must be one of"),
    ({"id": "x", "pattern": "^a$", "examples": ["b"]}, "its example 'b' does not match"),
    ({"pattern": "^a$"}, "needs a string 'id'"),
])
def test_a_bad_grammar_is_refused_naming_the_entry(tmp_path, entry, says):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps([entry]))
    with pytest.raises(GrammarError, match=says.replace("[", r"\[").replace("(", r"\(")):
        load(path)
