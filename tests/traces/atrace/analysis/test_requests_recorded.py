"""The join on a real run: a PyTorch model served on this machine's CPU with the profiler
and the OpenTelemetry SDK (tests/data/serving_torch: host operators only)."""

from pathlib import Path

import numpy as np
import pytest

from traces.atrace import read_trace
from traces.atrace.analysis.requests.joining import find_steps, join, requests_from_spans
from traces.atrace.analysis.requests.report import report
from traces.atrace.io.otlp import read_otlp_json

DATA = Path(__file__).resolve().parents[3] / "data" / "serving_torch"


@pytest.fixture(scope="module")
def recorded():
    trace = read_trace(DATA / "trace.json.gz")
    requests = requests_from_spans(read_otlp_json(DATA / "spans.jsonl.gz"))
    return trace, requests, find_steps(trace)


def test_every_request_is_found_in_one_step_per_token_it_generated(recorded):
    trace, requests, steps = recorded
    assert len(requests) == 24 and len(steps) == 69
    assert steps.basis == "host"  # no device in a CPU run: a step's work is its time on the host
    joined = join(trace, requests, steps, mode="ids")
    assert joined.mode == "ids" and joined.confidence == "high" and joined.unknown_ids == 0
    per_request = np.bincount(joined.pair_req, minlength=len(requests))
    assert (per_request == requests.output_tokens).all()


def test_the_trace_clock_is_put_on_the_spans_clock(recorded):
    trace, requests, steps = recorded
    joined = join(trace, requests, steps, mode="ids")
    assert joined.clock_offset_ns == trace.meta["baseTimeNanoseconds"]
    first = {}
    for step, req in zip(joined.pair_step.tolist(), joined.pair_req.tolist(), strict=True):
        first.setdefault(req, step)
    # A request's first step starts when its prefill span does (it was admitted into it).
    gap_ms = [(steps.start[first[i]] + joined.clock_offset_ns - requests.phase_start["prefill"][i]) / 1e6
              for i in range(len(requests))]
    assert max(abs(g) for g in gap_ms) < 2.0


def test_time_overlap_on_the_serving_thread_finds_the_same_batches(recorded):
    trace, requests, steps = recorded
    by_ids = join(trace, requests, steps, mode="ids")
    by_time = join(trace, requests, steps, mode="time")
    assert by_time.mode == "time" and by_time.confidence == "medium"  # the spans name the process and thread

    def pairs(j):
        return sorted(zip(j.pair_step.tolist(), j.pair_req.tolist(), j.pair_tokens.tolist(), strict=True))

    assert pairs(by_time) == pairs(by_ids)


def test_shares_sum_to_each_step_and_the_slowest_waited_in_the_queue(recorded):
    trace, requests, steps = recorded
    joined = join(trace, requests, steps)
    sums = np.bincount(joined.pair_step, weights=joined.pair_share, minlength=len(steps))
    assert (sums == steps.work).all()
    result = report(trace, requests, steps, joined)
    worst = result["worst"][0]
    assert worst["cause"] == "queue" and worst["reason"].startswith("queued ")
    assert worst["operators"][0]["name"].startswith("aten::")
    assert result["latency_ms"]["p50"] < result["latency_ms"]["p99"]
