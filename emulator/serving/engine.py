"""An inference service on an emulated accelerator: requests in, engine steps out.

Requests arrive as a Poisson process with mixed prompt and output lengths and wait in a
queue; the engine batches continuously: every step it admits waiting requests while the
batch has room (``max_batch`` requests, ``max_prefill_tokens`` prompt tokens a step), runs
one step in which each new request is prefilled (its whole prompt) and every running one
decodes one token, and drops the requests that have produced all their tokens. A batch's
membership changes every step.

Each step is recorded into the device trace by :mod:`emulator.serving.trace` (an
``engine_step#N`` annotation whose args name the requests of its batch and their tokens,
the kernels it launched, the device's health as counter samples) and each finished request
emits its spans with the OpenTelemetry SDK (:mod:`emulator.serving.spans`).

Problems it plays on demand (``problems=``), each over the middle third of the run:

* ``long_prefill``: up to ten 7,000-token prompts whose prefill shares steps with the decodes;
* ``throttled``: the device runs hot (92 °C) at half its clock;
* ``host_stall``: the scheduler stalls 200 ms on the host between two steps, every 300-500 ms;
* ``full_queue``: arrivals quadruple while the batch is a third of its size, so requests queue.

The run is reproducible from its seed; ``ServingRun.truth`` says which requests each
played problem touched (the known answers the join is checked against).
"""

from __future__ import annotations

import math
import random
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = ["ServingConfig", "ServedRequest", "Step", "ServingEngine", "ServingRun", "SERVING_PROBLEMS"]

SERVING_PROBLEMS = ("long_prefill", "throttled", "host_stall", "full_queue")
MS = 1_000_000  # ns
US = 1_000
LONG_PROMPT = 7000
STALL_NS = 200 * MS
THROTTLE_CLOCK = 0.5
HOT_C, NORMAL_C = 92.0, 64.0
PROMPTS = ((64, 0.25), (256, 0.35), (768, 0.25), (1536, 0.15))  # (tokens, weight)
OUTPUTS = ((16, 0.3), (64, 0.45), (128, 0.25))


@dataclass(frozen=True)
class ServingConfig:
    """How the service is loaded and shaped."""

    rate_per_s: float = 20.0
    max_batch: int = 24
    max_prefill_tokens: int = 8192
    max_queue: int = 10_000
    step_base_us: float = 3000.0  # a step's fixed cost (weights read once a step)
    prefill_token_us: float = 25.0
    decode_token_us: float = 90.0
    schedule_us: float = 250.0  # host time to form a batch
    problems: frozenset[str] = frozenset()
    seed: int = 0

    def __post_init__(self) -> None:
        unknown = set(self.problems) - set(SERVING_PROBLEMS)
        if unknown:
            raise ValueError(f"unknown serving problems {sorted(unknown)}; known: {list(SERVING_PROBLEMS)}")
        if self.rate_per_s <= 0 or self.max_batch < 1:
            raise ValueError("rate_per_s must be positive and max_batch at least 1")


@dataclass
class ServedRequest:
    id: str
    arrival_ns: int
    prompt_tokens: int
    output_tokens: int
    admitted_ns: int = -1
    first_token_ns: int = -1
    done_ns: int = -1
    generated: int = 0
    steps: list[int] = field(default_factory=list)
    rejected: bool = False

    @property
    def finished(self) -> bool:
        return self.done_ns >= 0


@dataclass
class Step:
    """One engine step: when, which requests with how many tokens each, and its device time."""

    index: int
    start_ns: int
    end_ns: int
    request_ids: list[str]
    tokens: list[int]
    phases: list[str]  # "prefill" or "decode", per request
    device_ns: int
    clock_share: float
    temperature_c: float


@dataclass
class ServingRun:
    requests: list[ServedRequest]
    steps: list[Step]
    t0_ns: int
    end_ns: int
    stalls: list[tuple[int, int]]
    problems: frozenset[str]
    problem_window: tuple[int, int]
    truth: dict[str, set[str]]  # problem -> ids of the requests it touched


def _pick(rng: random.Random, table) -> int:
    values, weights = zip(*table, strict=True)
    base = rng.choices(values, weights)[0]
    return max(1, int(base * rng.uniform(0.7, 1.3)))


class ServingEngine:
    """The engine's state, stepped in emulated time (``run``) or by a live capture."""

    def __init__(self, config: ServingConfig, t0_ns: int, duration_s: float,
                 device_clock: Callable[[int], float] | None = None) -> None:
        self.config = config
        self.device_clock = device_clock  # the device's clock share at a time (a live device)
        self.rng = random.Random(config.seed)
        self.t0 = t0_ns
        self.end = t0_ns + int(duration_s * 1e9)
        third = (self.end - t0_ns) // 3
        self.window = (t0_ns + third, t0_ns + 2 * third)
        self.queue: deque[ServedRequest] = deque()
        self.running: list[ServedRequest] = []
        self.requests: list[ServedRequest] = []
        self.steps: list[Step] = []
        self.stalls: list[tuple[int, int]] = []
        self.next_arrival = t0_ns
        self._long_left = 10 if "long_prefill" in config.problems else 0
        self._next_stall = self.window[0] + 100 * MS if "host_stall" in config.problems else None
        self._arrive_until(t0_ns)

    # -- arrivals --------------------------------------------------------------------------
    def _in_window(self, t: int) -> bool:
        return self.window[0] <= t < self.window[1]

    def _rate(self, t: int) -> float:
        boost = 4.0 if "full_queue" in self.config.problems and self._in_window(t) else 1.0
        return self.config.rate_per_s * boost

    def _arrive_until(self, t: int) -> None:
        while self.next_arrival <= t and self.next_arrival < self.end:
            at = self.next_arrival
            prompt = _pick(self.rng, PROMPTS)
            if self._long_left and self._in_window(at) and self.rng.random() < 0.3:
                prompt, self._long_left = LONG_PROMPT, self._long_left - 1
            req = ServedRequest(f"req-{self.config.seed}-{len(self.requests):05d}", at, prompt, _pick(self.rng, OUTPUTS))
            self.requests.append(req)
            if len(self.queue) >= self.config.max_queue:
                req.rejected, req.done_ns = True, at
            else:
                self.queue.append(req)
            self.next_arrival = at + max(int(self.rng.expovariate(self._rate(at)) * 1e9), 1)

    # -- device ----------------------------------------------------------------------------
    def clock_share(self, t: int) -> float:
        played = THROTTLE_CLOCK if "throttled" in self.config.problems and self._in_window(t) else 1.0
        return min(played, self.device_clock(t)) if self.device_clock is not None else played

    def temperature(self, t: int) -> float:
        return HOT_C if self.clock_share(t) < 1.0 else NORMAL_C + 2.0 * math.sin(t / 1e9)

    # -- one step --------------------------------------------------------------------------
    def _admit(self, t: int) -> list[ServedRequest]:
        cfg, admitted, budget = self.config, [], self.config.max_prefill_tokens
        batch = cfg.max_batch // 3 if "full_queue" in cfg.problems and self._in_window(t) else cfg.max_batch
        while self.queue and len(self.running) + len(admitted) < batch:
            if admitted and self.queue[0].prompt_tokens > budget:
                break
            req = self.queue.popleft()
            req.admitted_ns = t
            budget -= req.prompt_tokens
            admitted.append(req)
        return admitted

    def idle_until(self) -> int | None:
        """When the engine next has work, if it has none now."""
        if self.running or self.queue:
            return None
        return self.next_arrival if self.next_arrival < self.end else None

    def step(self, t: int) -> Step | None:
        """Run one step at ``t`` (after a stall, if one is due); None when there is no work."""
        self._arrive_until(t)
        if self._next_stall is not None and t >= self._next_stall and self._in_window(t):
            self.stalls.append((t, t + STALL_NS))
            t += STALL_NS
            self._next_stall = t + int(self.rng.uniform(150, 350) * MS)
            self._arrive_until(t)
        new = self._admit(t)
        if not new and not self.running:
            return None
        cfg = self.config
        prefill = sum(r.prompt_tokens for r in new)
        decodes = len(self.running)
        clock = self.clock_share(t)
        device_us = (cfg.step_base_us + cfg.prefill_token_us * prefill + cfg.decode_token_us * decodes) / clock
        device_ns = int(device_us * US * self.rng.uniform(0.97, 1.04))
        end = t + int(cfg.schedule_us * US) + device_ns + int(self.rng.uniform(80, 160) * US)
        members = self.running + new
        step = Step(
            index=len(self.steps), start_ns=t, end_ns=end, request_ids=[r.id for r in members],
            tokens=[1] * decodes + [r.prompt_tokens for r in new],
            phases=["decode"] * decodes + ["prefill"] * len(new),
            device_ns=device_ns, clock_share=clock, temperature_c=self.temperature(t),
        )
        self.steps.append(step)
        for r in members:
            r.steps.append(step.index)
            r.generated += 1
            if r.first_token_ns < 0:
                r.first_token_ns = end
        self.running = [r for r in members if r.generated < r.output_tokens]
        for r in members:
            if r.generated >= r.output_tokens:
                r.done_ns = end
        return step

    def run(self, drain_s: float = 60.0) -> ServingRun:
        """Serve every request that arrives before the end, in emulated time."""
        t, limit = self.t0, self.end + int(drain_s * 1e9)
        while t < limit:
            step = self.step(t)
            if step is None:
                nxt = self.idle_until()
                if nxt is None:
                    break
                t = max(nxt, t + 1)
                continue
            t = step.end_ns + int(self.rng.uniform(20, 60) * US)
        return self.result()

    def result(self) -> ServingRun:
        return ServingRun(self.requests, self.steps, self.t0, self.end, self.stalls,
                          self.config.problems, self.window, self._truth())

    # -- known answers -----------------------------------------------------------------------
    def _truth(self) -> dict[str, set[str]]:
        done = [r for r in self.requests if r.finished and not r.rejected]
        truth: dict[str, set[str]] = {p: set() for p in self.config.problems}
        lo, hi = self.window
        if "throttled" in truth:
            truth["throttled"] = {r.id for r in done if r.admitted_ns < hi and r.done_ns > lo}
        if "host_stall" in truth:
            truth["host_stall"] = {r.id for r in done for a, b in self.stalls if r.arrival_ns < b and r.done_ns > a}
        if "full_queue" in truth:
            truth["full_queue"] = {r.id for r in done if r.admitted_ns - r.arrival_ns > 20 * MS}
        if "long_prefill" in truth:
            long_steps = {s.index for s in self.steps if max(s.tokens, default=0) >= LONG_PROMPT}
            truth["long_prefill"] = {r.id for r in done if long_steps & set(r.steps[1:])}
        return truth
