"""The advisor on synthetic Kineto files with a known problem (tests/support/tracegen/problems.py): each
rule fires on its trace with a saving within 10 % of what the problem costs, measured on
the raw files by exact.py (the problem trace's steps against its twin's, written with the
same random draws), and nothing fires on the twins."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.tracegen.problems import PROBLEMS, write_problem_trace
from tests.traces.atrace import exact
from traces.atrace import advise, read_trace


def _steps(path: Path) -> list[exact.Slice]:
    return [s for s in exact.slices(exact.load_raw(path)) if s.name.startswith("ProfilerStep#")]


def _device_idle_per_step(path: Path) -> float:
    """Per step: its time less the union of the device work that starts in it (ns)."""
    slices = exact.slices(exact.load_raw(path))
    device = [s for s in slices if s.cat in exact.DEVICE_WORK_CATS]
    steps = [s for s in slices if s.name.startswith("ProfilerStep#")]
    idle = 0
    for st in steps:
        busy, end = 0, None
        for d in sorted((d for d in device if st.ts <= d.ts < st.end), key=lambda d: d.ts):
            if end is None or d.ts > end:
                busy, end = busy + d.dur, d.end
            elif d.end > end:
                busy, end = busy + d.end - end, d.end
        idle += st.dur - busy
    return idle / len(steps)


def _cost_per_step(problem: str, path: Path, twin: Path) -> float:
    """What the problem costs a step, from the raw files (ns)."""
    if problem == "launch_bound":
        return _device_idle_per_step(path)
    a, b = _steps(path), _steps(twin)
    return (sum(s.dur for s in a) - sum(s.dur for s in b)) / len(a)


@pytest.mark.parametrize("seed", [0, 7])
@pytest.mark.parametrize("problem", PROBLEMS)
def test_each_problem_is_found_with_what_it_costs(tmp_path, problem, seed):
    path, twin = tmp_path / f"{problem}.json", tmp_path / f"{problem}.twin.json"
    write_problem_trace(path, problem, seed=seed)
    write_problem_trace(twin, problem, seed=seed, twin=True)
    found, clean = advise(read_trace(path)), advise(read_trace(twin))
    assert found.rules == [problem], found.rules
    assert clean.findings == [], clean.rules
    cost = _cost_per_step(problem, path, twin)
    assert cost > 0
    got = found.rule(problem).saving_per_step_ns
    assert abs(got - cost) <= 0.10 * cost, (got, cost)


def test_the_clean_base_is_device_bound_with_no_finding(tmp_path):
    path = tmp_path / "clean.json.gz"
    n = write_problem_trace(path, None, steps=3)
    trace = read_trace(path)
    assert 0 < len(trace) < n  # flows and metadata are written, not kept as events
    found = advise(trace)
    assert found.verdict == "device-bound" and found.findings == []


def test_unknown_problem(tmp_path):
    with pytest.raises(ValueError, match="unknown problem"):
        write_problem_trace(tmp_path / "x.json", "gremlins")
