"""Engine steps found in traces: each real serving trace's step and what its name says, names
of one step nested in each other, none in the real traces that serve nothing, and a step's
device time (its kernels, copies and graph replays, by correlation id)."""

import pytest

from tests.support.traces import REAL_TRACES, each_real_trace, real_trace
from traces.atrace import Kind, TraceBuilder, read_trace
from traces.atrace.analysis.requests.steps import find_steps

SERVING = {  # the real serving traces, and what their one step says
    "sglang_qwen3_prefilldecode.json.gz": dict(grammar="execute-sq-sk+sglang-step", kind="prefill", batch=15,
                                               prefill=15, decode=0, tokens=15360, prefill_tokens=15360),
    "vllm_prefilldecode_piecewise.json.gz": dict(grammar="execute-sq-sk", kind="mixed", batch=46, prefill=9,
                                                 decode=37, tokens=8192, prefill_tokens=8155, decode_tokens=37),
}


@pytest.mark.parametrize("name", sorted(SERVING))
def test_the_step_of_each_real_serving_trace_is_read(name):
    trace = read_trace(real_trace(name))
    steps = find_steps(trace)
    assert len(steps) == 1 and steps.notes == []
    info = steps.info[0]
    for key, value in SERVING[name].items():
        assert getattr(info, key) == value, key
    assert steps.basis == "device"


def test_sglang_s_step_nested_in_the_profiling_patch_s_is_one_step_spanning_the_outer():
    trace = read_trace(real_trace("sglang_qwen3_prefilldecode.json.gz"))
    steps = find_steps(trace)
    outer = trace.strings.strings[int(trace.name[steps.event[0]])]
    assert outer.startswith("execute_15360_context_15(")
    # Every kernel and copy of the capture was launched inside the outer annotation.
    assert len(steps.work_event) == 534 and steps.grammars() == {"execute-sq-sk+sglang-step": 1}


# Every other timed real trace (the host execution trace has no times: it is read with its Kineto trace).
OTHERS = sorted(p for p in REAL_TRACES.glob("*.json.gz") if p.name not in SERVING and "host_et" not in p.name
                ) if REAL_TRACES.is_dir() else []


@pytest.mark.parametrize("path", each_real_trace(OTHERS))
def test_no_step_is_found_in_the_real_traces_that_serve_nothing(path):
    assert len(find_steps(read_trace(path))) == 0


def test_the_device_time_of_a_real_step_is_its_kernels_copies_and_graph_replays():
    trace = read_trace(real_trace("vllm_prefilldecode_piecewise.json.gz"))
    steps = find_steps(trace)
    graph = trace.strings.lookup("hipGraphLaunch")
    replays = set(trace.corr[(trace.name == graph)].tolist())
    launched = set(trace.corr[steps.work_event].tolist())
    assert replays and replays <= launched  # kernels of the piecewise graphs count
    assert len(steps.work_event) == 423  # every kernel and copy of the capture (413 + 10)
    assert int(steps.work[0]) == int(trace.dur[steps.work_event].sum())


def test_two_names_of_one_step_that_disagree_are_noted():
    b = TraceBuilder()
    host = b.track("engine", "main")
    b.add("execute_100_context_2(sq100sk100sqsq5000sqsk5000)_generation_0(sq0sk0sqsq0sqsk0)", 1_000, 10_000, host,
          kind=Kind.ANNOTATION)
    b.add("step[EXTEND bs=3 toks=100]", 2_000, 5_000, host, kind=Kind.ANNOTATION)
    steps = find_steps(b.build())
    assert len(steps) == 1 and steps.info[0].batch == 2  # the outer name's facts first
    assert "disagree: batch 2 vs 3" in steps.notes[0]

