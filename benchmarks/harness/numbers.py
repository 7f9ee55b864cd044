"""Timers and the statistics the benchmarks print: percentiles, medians, repeated timings."""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

NAN = float("nan")


def percentile(values: Iterable[float], p: float) -> float:
    """The nearest-rank `p`-th percentile (0-100): the smallest value with at least `p` % of
    the values at or below it (the median of an even count is the lower middle one). NaN for
    no values."""
    ordered = sorted(values)
    if not ordered:
        return NAN
    rank = math.ceil(p * len(ordered) / 100 - 1e-9)
    return ordered[min(len(ordered), max(1, rank)) - 1]


def percentiles(values: Iterable[float], ps: Iterable[float] = (50, 95, 99)) -> dict[float, float]:
    """``{p: percentile(values, p)}`` for each of `ps`, the values sorted once."""
    ordered = sorted(values)
    return {p: percentile(ordered, p) for p in ps}


def median(values: Iterable[float]) -> float:
    """The median (the mean of the two middle values for an even count); NaN for none."""
    values = list(values)
    return statistics.median(values) if values else NAN


def summary(
    seconds: Iterable[float],
    ps: Iterable[float] = (95,),
    *,
    scale: float = 1000.0,
    unit: str = "ms",
    spec: str = ".2f",
) -> str:
    """``median 1.23 ms, p95 4.56 ms`` of a list of seconds (scaled to `unit`)."""
    seconds = list(seconds)
    parts = [f"median {median(seconds) * scale:{spec}} {unit}"]
    parts += [f"p{p:g} {percentile(seconds, p) * scale:{spec}} {unit}" for p in ps]
    return ", ".join(parts)


@dataclass
class Timing:
    """Seconds of each measured run of one piece of work: wall clock and this process's CPU."""

    wall: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)
    cold: float | None = None  # the first run's wall seconds, when it was timed apart
    value: Any = None  # what the last run returned

    @property
    def runs(self) -> int:
        return len(self.wall)

    @property
    def median(self) -> float:
        return median(self.wall)

    @property
    def best(self) -> float:
        return min(self.wall, default=NAN)

    @property
    def mean(self) -> float:
        return statistics.fmean(self.wall) if self.wall else NAN

    @property
    def cpu_median(self) -> float:
        return median(self.cpu)

    def p(self, q: float) -> float:
        """The `q`-th percentile of the wall times."""
        return percentile(self.wall, q)


def timed(fn: Callable[[], Any], repeat: int = 5, *, warmup: int = 0, cold: bool = False) -> Timing:
    """Runs `fn` `repeat` times and times each run (wall and CPU seconds). With ``cold`` the
    first run is timed apart first (``Timing.cold``: caches empty); `warmup` untimed runs
    come before the measured ones."""
    timing = Timing()
    if cold:
        with Stopwatch() as watch:
            timing.value = fn()
        timing.cold = watch.wall
    for _ in range(warmup):
        timing.value = fn()
    for _ in range(repeat):
        with Stopwatch() as watch:
            timing.value = fn()
        timing.wall.append(watch.wall)
        timing.cpu.append(watch.cpu)
    return timing


def rate(count: float, fn: Callable[[], Any]) -> float:
    """`count` divided by the wall seconds `fn` took: work done per second."""
    with Stopwatch() as watch:
        fn()
    return count / max(watch.wall, 1e-12)


class Stopwatch:
    """Wall and CPU seconds of a ``with`` block (``.wall``, ``.cpu``); ``.lap()`` reads the
    wall seconds so far inside it. CPU time is what a loaded machine distorts least."""

    def __init__(self) -> None:
        self.wall = self.cpu = 0.0
        self._wall0 = self._cpu0 = 0.0

    def __enter__(self) -> Stopwatch:
        self._wall0, self._cpu0 = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc) -> None:
        self.wall = time.perf_counter() - self._wall0
        self.cpu = time.process_time() - self._cpu0

    def lap(self) -> float:
        return time.perf_counter() - self._wall0
