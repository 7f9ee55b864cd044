"""The device trace of an inference service: engine steps as a profiler records them.

Per step, on the host thread ``scheduler`` of process ``engine``: an ``engine_step#N``
annotation over the whole step whose args carry the batch (``request_ids`` and ``tokens``: a
record-function annotation's args), a ``schedule`` host operator, per kernel a framework
operator (``fw::linear``, ``fw::attention``, ``fw::sample``, with its shapes) around an
``rtLaunchKernel`` with its correlation id, a ``rtStreamSynchronize`` until the
device is done and a ``sample`` operator. On the device's stream: the step's kernels (four
layers of QKV projection, attention, MLP, then the sampler), their durations a fixed share
of the step's device time. The device's temperature and clock are counter samples every
100 ms. A scheduler stall is a ``scheduler stall`` range between two steps.
"""

from __future__ import annotations

import time

from emulator.serving.engine import MS, US, ServingConfig, ServingEngine, ServingRun, Step
from traces.atrace.model.builder import TraceBuilder
from traces.atrace.model.trace import Kind, Trace

__all__ = ["StepRecorder", "serve", "KERNELS", "STEP_PREFIX", "HOST_PID", "HOST_TID"]

STEP_PREFIX = "engine_step#"
HOST_PID, HOST_TID = "engine", "scheduler"
LAYERS = 4
#: (kernel, share of a step's device time) for one layer; the sampler takes the rest.
LAYER_KERNELS = (("qkv_proj_gemm", 0.06), ("attention", 0.08), ("mlp_gemm", 0.10))
SAMPLER_SHARE = 1.0 - LAYERS * sum(s for _, s in LAYER_KERNELS)
KERNELS = ("qkv_proj_gemm", "flash_attn_varlen_fwd", "paged_attention_decode", "mlp_gemm", "sampler")
LAUNCH_US = 4.0
#: The framework operator that launches each kernel (a host operator around its launch).
FRAMEWORK_OPS = {"qkv_proj_gemm": "linear", "flash_attn_varlen_fwd": "attention",
                 "paged_attention_decode": "attention", "mlp_gemm": "linear", "sampler": "sample"}
HIDDEN, VOCAB = 2048, 32000
HEALTH_EVERY_NS = 100 * MS


class StepRecorder:
    """Writes engine steps into a trace builder."""

    def __init__(self, device_type: str = "inference", model: str = "Emu NX-1") -> None:
        b = self.builder = TraceBuilder(source="emulator")
        self.host = b.track(HOST_PID, HOST_TID, process_name=HOST_PID, thread_name=HOST_TID, sort_index=0)
        proc = f"{model} (device 0)"
        self.stream = b.track(f"{device_type} 0", 0, process_name=proc, thread_name="stream 0",
                              is_device=True, device=0, stream=0, sort_index=10)
        self.health = b.track(f"{device_type} 0", "health", process_name=proc, thread_name="health", sort_index=20)
        self.corr = 0
        self.device_free = 0
        self.next_health = 0
        b.meta.update(device_type=device_type, device_model=model, workload="llm_serving")

    def _kernels(self, step: Step) -> list[tuple[str, float]]:
        attention = "flash_attn_varlen_fwd" if "prefill" in step.phases else "paged_attention_decode"
        layer = [(attention if k == "attention" else k, share) for k, share in LAYER_KERNELS]
        return layer * LAYERS + [("sampler", SAMPLER_SHARE)]

    def record(self, step: Step, schedule_ns: int) -> None:
        b, t = self.builder, step.start_ns
        self._health_until(step)
        b.add(f"{STEP_PREFIX}{step.index}", t, step.end_ns - t, self.host, kind=Kind.ANNOTATION,
              cat="user_annotation", op="engine_step",
              args={"request_ids": step.request_ids, "tokens": step.tokens})
        b.add("schedule", t, schedule_ns, self.host, kind=Kind.HOST_OP, cat="host_op")
        t += schedule_ns
        device_t = max(t + int(LAUNCH_US * US), self.device_free)
        left = step.device_ns
        kernels = self._kernels(step)
        rows = sum(step.tokens)
        launch = int(LAUNCH_US * US)
        for i, (name, share) in enumerate(kernels):
            self.corr += 1
            # The framework operator around the launch, as a profiler records it.
            op = FRAMEWORK_OPS[name]
            shapes = [[rows, HIDDEN], [HIDDEN, VOCAB if op == "sample" else HIDDEN]]
            b.add(f"fw::{op}", t, launch, self.host, kind=Kind.HOST_OP, cat="host_op", args={"shapes": shapes})
            b.add("rtLaunchKernel", t + launch // 4, int(launch * 0.6), self.host, kind=Kind.RUNTIME, cat="runtime",
                  corr=self.corr)
            dur = left if i == len(kernels) - 1 else int(step.device_ns * share)
            left -= dur
            device_t = max(device_t, t + launch)
            b.add(name, device_t, max(dur, 1), self.stream, kind=Kind.KERNEL, cat="kernel", corr=self.corr,
                  op=name, args={"step": step.index, "shapes": shapes})
            device_t += max(dur, 1)
            t += launch
        self.device_free = device_t
        sync_end = max(device_t, t + US)
        b.add("rtStreamSynchronize", t, sync_end - t, self.host, kind=Kind.RUNTIME, cat="runtime")
        b.add("sample", sync_end, max(step.end_ns - sync_end - 10 * US, US), self.host, kind=Kind.HOST_OP,
              cat="host_op")

    def stall(self, start: int, end: int) -> None:
        self.builder.add("scheduler stall", start, end - start, self.host, kind=Kind.HOST_OP, cat="host_op",
                         op="stall")

    def _health_until(self, step: Step) -> None:
        if self.next_health == 0:
            self.next_health = step.start_ns
        while self.next_health <= step.end_ns:
            self.builder.add("device", self.next_health, 0, self.health, kind=Kind.COUNTER, cat="health", ph="C",
                             args={"temperature_c": round(step.temperature_c, 1),
                                   "clock_share": round(step.clock_share, 3)})
            self.next_health += HEALTH_EVERY_NS

    def build(self, run: ServingRun) -> Trace:
        self.builder.meta.update(problems=sorted(run.problems), serving_requests=len(run.requests),
                                 serving_steps=len(run.steps))
        return self.builder.build()


def _record_run(rec: StepRecorder, run: ServingRun, schedule_us: float) -> None:
    stalls = iter(run.stalls)
    stall = next(stalls, None)
    for step in run.steps:
        while stall is not None and stall[1] <= step.start_ns:
            rec.stall(*stall)
            stall = next(stalls, None)
        rec.record(step, int(schedule_us * US))


def serve(duration_s: float, config: ServingConfig | None = None, *, t0_ns: int | None = None,
          device_type: str = "inference") -> tuple[Trace, ServingRun]:
    """Serve ``duration_s`` seconds of arrivals in emulated time (as fast as it runs);
    returns the device trace and the run (requests with their times, steps, known answers).
    Timestamps are epoch ns from ``t0_ns`` (now by default)."""
    config = config or ServingConfig()
    t0 = time.time_ns() if t0_ns is None else t0_ns
    run = ServingEngine(config, t0, duration_s).run()
    rec = StepRecorder(device_type)
    _record_run(rec, run, config.schedule_us)
    rec.builder.meta.update(seed=config.seed, duration_s=duration_s, start_epoch_s=t0 / 1e9)
    return rec.build(run), run
