"""The device trace of the inference service: engine steps naming their batch, each kernel
launched from the host under its correlation id, health samples, and scheduler stalls."""

import numpy as np

from emulator.serving.engine import MS, ServingConfig
from emulator.serving.trace import HEALTH_EVERY_NS, KERNELS, STEP_PREFIX, serve
from traces.atrace.model.trace import Kind

T0 = 1_700_000_000_000_000_000


def _run(*problems, seed=3, duration=3.0):
    return serve(duration, ServingConfig(problems=frozenset(problems), seed=seed), t0_ns=T0)


def _named(trace, prefix):
    return [i for i in range(len(trace)) if trace.strings[int(trace.name[i])].startswith(prefix)]


def test_the_trace_steps_name_their_batch_and_their_kernels_follow():
    trace, run = _run()
    steps = _named(trace, STEP_PREFIX)
    assert len(steps) == len(run.steps)
    first = trace.args.get(steps[0])
    assert (
        first["request_ids"] == run.steps[0].request_ids and first["tokens"] == run.steps[0].tokens
    )
    kernels = trace.kind == Kind.KERNEL
    assert kernels.sum() == 13 * len(run.steps)
    assert (trace.kind == Kind.COUNTER).sum() > 10


def test_every_kernel_is_launched_from_the_host_under_its_correlation_id_and_after_it():
    trace, _ = _run(duration=1.0)
    kernels = np.flatnonzero(trace.kind == Kind.KERNEL)
    launches = {
        int(trace.corr[i]): i
        for i in np.flatnonzero(trace.kind == Kind.RUNTIME)
        if trace.corr[i] > 0
    }
    assert set(trace.names(kernels)) <= set(KERNELS)
    assert sorted(int(trace.corr[k]) for k in kernels) == sorted(launches)
    for k in kernels:
        launch = launches[int(trace.corr[k])]
        assert trace.ts[k] >= trace.ts[launch]
    starts = np.sort(trace.ts[kernels])
    ends = np.sort(trace.end[kernels])
    assert (
        starts[1:] >= ends[:-1]
    ).all()  # one stream: a kernel starts when the one before it ended


def test_prefill_steps_run_flash_attention_and_decode_only_steps_paged_attention():
    trace, run = _run(duration=2.0)
    by_step: dict[int, set[str]] = {}
    for i in np.flatnonzero(trace.kind == Kind.KERNEL):
        by_step.setdefault(trace.args.get(int(i))["step"], set()).add(
            trace.strings[int(trace.name[i])]
        )
    for step in run.steps:
        attention = by_step[step.index] & {"flash_attn_varlen_fwd", "paged_attention_decode"}
        assert attention == {
            "flash_attn_varlen_fwd" if "prefill" in step.phases else "paged_attention_decode"
        }


def test_health_is_sampled_every_100_ms_over_the_steps():
    trace, run = _run(duration=2.0)
    samples = np.sort(trace.ts[trace.kind == Kind.COUNTER])
    assert HEALTH_EVERY_NS == 100 * MS
    assert (np.diff(samples) == HEALTH_EVERY_NS).all()
    assert samples[0] == run.steps[0].start_ns and samples[-1] <= run.steps[-1].end_ns


def test_a_scheduler_stall_sits_between_two_steps_and_the_meta_says_what_was_played():
    trace, run = _run("host_stall", duration=6.0)
    stalls = _named(trace, "scheduler stall")
    assert len(stalls) == len(run.stalls) > 0
    step_starts = np.array([s.start_ns for s in run.steps])
    for i in stalls:
        following = step_starts[step_starts >= trace.end[i]]
        assert (
            following.size
            and not ((step_starts > trace.ts[i]) & (step_starts < trace.end[i])).any()
        )
    assert trace.meta["problems"] == ["host_stall"] and trace.meta["serving_steps"] == len(
        run.steps
    )
    assert trace.meta["start_epoch_s"] == T0 / 1e9 and trace.meta["workload"] == "llm_serving"
