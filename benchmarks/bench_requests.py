"""Joining request spans to engine steps: time and memory at scale, exact shares, and whether
the emulator's problems are blamed right.

    .venv/bin/python benchmarks/bench_requests.py [--requests 10000] [--events 1000000] [--runs 40]

1. The join at scale: the emulator's inference service serves until about ``--requests``
   requests and ``--events`` trace events (arrival rate and length chosen for both), its
   spans made by the OpenTelemetry SDK and decoded from OTLP JSON as a file would be; then
   ``requests_from_spans`` + ``find_steps`` + ``join`` + ``report`` are timed (best of 3)
   with their peak memory (tracemalloc, which sees numpy's arrays), in both join modes.
2. Shares: the largest difference, over every step, between the sum of its requests' shares
   and its work (ns).
3. Real engines (``--engines``): on each real serving trace of ../shared/data/real-traces
   (SGLang, vLLM), spans made by the OpenTelemetry SDK on the trace's Unix clock for the
   batch its step names, in vLLM's shape (one span, latency attributes) and SGLang's (stage
   spans): every request joined, the batch as large as the step says, the shares' sum
   against the step's device time (goal: within 1 µs).
4. Time and phase at scale (``--phase``): the run of (1) with its steps renamed as vLLM
   names them (``execute_T_context_P(…)_generation_D(…)``, no ids) joined by time and
   phase, with the emulator's phase spans and with vLLM's single spans; time, peak memory,
   pairs right against the run's truth, the steps' counts confirmed (goal: ≤ 2 s, ≤ 1 GB).
5. Causes: ``--runs`` seeds of a 6 s run for each problem and none: a run passes when at
   least half of its ten slowest requests are blamed on the problem played (with
   ``long_prefill`` its own long prompt counts too) and none on the device unless the
   device was throttled; with no problem, when no request at all is blamed on the device.
"""

from __future__ import annotations

import argparse
import time
import tracemalloc
from collections import Counter

import numpy as np
from harness import timed
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

from emulator.serving.engine import ServingConfig
from emulator.serving.spans import emit_run, memory_provider, resource_for
from emulator.serving.trace import serve
from traces.atrace.analysis.requests.joining import find_steps, join, requests_from_spans
from traces.atrace.analysis.requests.report import analyse_requests, report
from traces.atrace.io.otlp import read_otlp_json, request_to_json

T0 = 1_700_000_000_000_000_000
EXPECT = {"long_prefill": {"prefill_interference", "long_prompt"}, "throttled": {"throttled"},
          "host_stall": {"host_stall"}, "full_queue": {"queue"}}


def _spans(run, resource=None):
    provider, exporter = memory_provider(resource or resource_for("bench-host", "ENX-BENCH"))
    emit_run(provider.get_tracer("bench"), run)
    finished = exporter.get_finished_spans()
    # Through OTLP JSON lines, as a Collector's file exporter would hand them over.
    lines = [request_to_json(encode_spans(finished[i : i + 512])) for i in range(0, len(finished), 512)]
    return read_otlp_json(lines)


def scale(n_requests: int, n_events: int, rate: float | None = None) -> None:
    # The arrival rate sets the trace's size: batches of up to 64, 30 requests a second make
    # about 180 trace events a request, 36 about 100, 45 about 45 (larger batches, fewer steps).
    rate = rate or (30.0 if n_events >= 150 * n_requests else 36.0)
    duration = n_requests / rate
    started = time.perf_counter()
    config = ServingConfig(rate_per_s=rate, max_batch=64, seed=1)
    trace, run = serve(duration, config, t0_ns=T0)
    spans = _spans(run)
    print(f"made {len(run.requests):,} requests ({len(spans):,} spans), a trace of {len(trace):,} events, "
          f"{len(run.steps):,} steps in {time.perf_counter() - started:.1f} s")
    if len(trace) < n_events * 0.8:
        print(f"  (fewer events than the {n_events:,} asked: the service's steps made {len(trace):,})")
    for mode in ("ids", "time"):
        timing = timed(lambda: _join(trace, spans, mode), 3)  # noqa: B023 - called at once
        best, result = timing.best, timing.value
        tracemalloc.start()  # a pass of its own: tracing allocations slows the pass
        _join(trace, spans, mode)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        print(f"join by {mode:4}: {result['requests']:,} requests x {len(trace):,} events: best of 3 {best:.2f} s, "
              f"peak {peak / 2**20:.0f} MiB allocated; {result['join']['pairs']:,} request-step pairs; "
              f"largest share-sum error {result['join']['max_share_error_ns']:.0f} ns")


def vllm_names(trace, run) -> None:
    """Rename the run's step annotations as vLLM names a step (no ids in the name; args are
    not read by a join by time)."""
    events = [i for i, n in enumerate(trace.names()) if n.startswith("engine_step#")]
    assert len(events) == len(run.steps)
    order = sorted(events, key=lambda i: int(trace.ts[i]))
    for ev, step in zip(order, sorted(run.steps, key=lambda s: s.start_ns), strict=True):
        p = [t for t, ph in zip(step.tokens, step.phases, strict=True) if ph == "prefill"]
        d = len(step.tokens) - len(p)
        name = (f"execute_{sum(step.tokens)}_context_{len(p)}(sq{sum(p)}sk{sum(p)}sqsq{sum(t * t for t in p)}"
                f"sqsk{sum(t * t for t in p)})_generation_{d}(sq{d}sk{d}sqsq{d}sqsk{d})")
        trace.name[ev] = trace.strings.intern(name)


def single_spans(spans):
    """vLLM's shape: the root span only (its latency attributes give the phases)."""
    return [s for s in spans if not s.parent_span_id]


def phase_scale(n_requests: int, n_events: int, rate: float | None = None) -> None:
    rate = rate or (30.0 if n_events >= 150 * n_requests else 36.0)  # as scale() does
    config = ServingConfig(rate_per_s=rate, max_batch=64, seed=1)
    trace, run = serve(n_requests / rate, config, t0_ns=T0)
    spans = _spans(run)
    vllm_names(trace, run)
    truth = {(s.index, rid) for s in run.steps for rid in s.request_ids}
    for label, given in (("phase spans", spans), ("vLLM single spans", single_spans(spans))):
        timing = timed(lambda: _join(trace, given, "time"), 3)  # noqa: B023 - called at once
        best, result = timing.best, timing.value
        tracemalloc.start()
        _join(trace, given, "time")
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        requests, steps = requests_from_spans(given), find_steps(trace)
        joined = join(trace, requests, steps, mode="time")
        found = {(int(s), requests.ids[r]) for s, r in zip(joined.pair_step.tolist(), joined.pair_req.tolist(),
                                                            strict=True)}
        check = result["join"]["check"]
        print(f"join by time and phase, {label}: {result['requests']:,} requests x {len(trace):,} events "
              f"({result['steps']:,} steps, grammar {', '.join(result['join']['grammars'])}): best of 3 {best:.2f} s, "
              f"peak {peak / 2**20:.0f} MiB; {len(found & truth):,} of {len(truth):,} true pairs found, "
              f"{len(found - truth):,} extra; counts confirm {check['steps_matching']:,} of "
              f"{check['steps_checked']:,} steps; confidence {result['join']['confidence']}; "
              f"largest share-sum error {result['join']['max_share_error_ns']:.0f} ns")


def engines() -> None:
    from tests.support.engine_spans import engine_spans
    from tests.support.traces import REAL_TRACES
    from traces.atrace import read_trace

    for name in ("sglang_qwen3_prefilldecode.json.gz", "vllm_prefilldecode_piecewise.json.gz"):
        trace = read_trace(REAL_TRACES / name)
        steps = find_steps(trace)
        for shape in ("vllm", "sglang"):
            spans, plan = engine_spans(trace, steps, shape)
            requests = requests_from_spans(spans)
            joined = join(trace, requests, steps)
            sums = np.bincount(joined.pair_step, weights=joined.pair_share, minlength=len(steps))
            batch = np.bincount(joined.pair_step, minlength=len(steps))
            joined_ids = {requests.ids[i] for i in joined.pair_req.tolist()}
            print(f"{name.split('.')[0]}, {shape} spans: step {steps.info[0].grammar} says batch "
                  f"{steps.info[0].batch} ({steps.info[0].prefill} prefill, {steps.info[0].decode} decode); "
                  f"{len(joined_ids)}/{len(plan)} requests joined, batch found {int(batch[0])}; "
                  f"shares {int(sums[0]):,} ns of the step's device time {int(steps.work[0]):,} ns "
                  f"(off by {abs(int(sums[0]) - int(steps.work[0]))} ns); by {joined.mode}, confidence "
                  f"{joined.confidence}")


def _join(trace, spans, mode: str) -> dict:
    requests = requests_from_spans(spans)
    steps = find_steps(trace)
    return report(trace, requests, steps, join(trace, requests, steps, mode=mode))


def causes(runs: int) -> None:
    print(f"causes over {runs} runs each (6 s of serving a run):")
    for problem in (None, *EXPECT):
        passed, tally = 0, Counter()
        for seed in range(runs):
            problems = frozenset({problem}) if problem else frozenset()
            trace, run = serve(6.0, ServingConfig(problems=problems, seed=1000 + seed), t0_ns=T0)
            result = analyse_requests(trace, _spans(run))
            worst = Counter(w["cause"] for w in result["worst"])
            tally.update(worst)
            if problem is None:
                ok = not any(r["cause"] == "throttled" for r in result["rows"])
            else:
                right = sum(v for k, v in worst.items() if k in EXPECT[problem])
                ok = right >= 5 and (problem == "throttled" or not worst.get("throttled"))
            passed += ok
        name = problem or "no problem"
        print(f"  {name:13}: {passed}/{runs} runs right ({100 * passed / runs:.0f} %); causes of the ten slowest: "
              + ", ".join(f"{k} {v}" for k, v in tally.most_common()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=10_000)
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--rate", type=float, default=None, help="arrivals a second (sets the trace's size)")
    parser.add_argument("--skip-scale", action="store_true")
    parser.add_argument("--engines", action="store_true", help="the real SGLang and vLLM traces")
    parser.add_argument("--phase", action="store_true", help="the join by time and phase at scale")
    args = parser.parse_args()
    if args.engines:
        engines()
    if args.phase:
        phase_scale(args.requests, args.events, args.rate)
    if not args.skip_scale:
        scale(args.requests, args.events, args.rate)
    if args.runs:
        causes(args.runs)


if __name__ == "__main__":
    main()
