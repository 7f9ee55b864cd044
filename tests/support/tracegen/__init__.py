"""Generators of synthetic traces for the tests and the benchmarks (never imported by the
project at run time: tests/test_layers.py holds that): Kineto traces of GPU training steps
of any size (:mod:`.kineto`, and its former compact shape :mod:`.compact`), and traces with
one known problem each for the advisor (:mod:`.problems`). Benchmarks put the repository
root on ``sys.path`` and import ``tests.support.tracegen`` like the tests."""

from .kineto import write_kineto_trace
from .problems import PROBLEMS, write_problem_trace

__all__ = ["PROBLEMS", "write_kineto_trace", "write_problem_trace"]
