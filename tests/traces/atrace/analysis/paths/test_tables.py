"""Steps and the critical-path table (whole trace and per step)."""

from __future__ import annotations

import numpy as np
import pytest

from emulator.workloads.tracing import capture
from traces.atrace import critical_path, read_trace
from traces.atrace.analysis.paths.tables import path_table, path_tables, step_list


@pytest.fixture(scope="module")
def emulated():
    trace = capture("inference", 0.05, seed=2)
    return trace, critical_path(trace)


def test_steps_are_listed_in_order_with_their_times(emulated):
    trace, _ = emulated
    steps = step_list(trace)
    assert [s["number"] for s in steps] == list(range(trace.meta["steps"]))
    first = trace.find_name("step#0")
    e = int(np.flatnonzero(trace.name == first)[0])
    assert steps[0]["start_us"] == trace.ts[e] / 1000 and steps[0]["dur_us"] == trace.dur[e] / 1000
    assert all(a["end_us"] <= b["start_us"] for a, b in zip(steps, steps[1:]))


@pytest.mark.slow  # a recorded PyTorch trace: torch imported and three models profiled
def test_a_trace_without_steps_lists_none(torch_traces):
    trace = read_trace(torch_traces["cnn"])
    names = [s["name"] for s in step_list(trace)]
    assert names == ["ProfilerStep#0", "ProfilerStep#1", "ProfilerStep#2"]
    trace_without = trace.take(np.flatnonzero(~np.isin(trace.name, [trace.find_name(n) for n in names])))
    assert step_list(trace_without) == []


def test_table_shares_add_up_to_the_path_and_slack_is_of_off_path_instances(emulated):
    trace, cp = emulated
    table = path_table(cp)
    assert not table["rows_truncated"]
    assert sum(r["path_us"] for r in table["rows"]) == pytest.approx(table["length_us"], abs=0.01)
    assert sum(r["share"] for r in table["rows"]) == pytest.approx(1.0, abs=1e-4)
    assert sum(r["on_path"] + r["off_path"] for r in table["rows"]) == len(cp.selected)
    # Least slack per operator type, recomputed by brute force.
    on = set(np.unique(cp.events).tolist())
    strings = trace.strings.strings
    for row in table["rows"]:
        side = row["side"] == "device"
        mine = [
            int(cp.slack_ns[k])
            for k, e in enumerate(cp.selected.tolist())
            if e not in on and strings[trace.op[e]] == row["op"] and bool(trace.on_device[e]) == side
        ]
        assert row["off_path"] == len(mine)
        if mine:
            assert row["min_slack_us"] == round(min(mine) / 1000, 3)
            assert row["min_slack_us"] <= row["median_slack_us"]
        else:
            assert row["min_slack_us"] is None


def test_each_step_path_equals_the_path_computed_on_the_whole_trace(emulated):
    trace, cp = emulated
    tables = path_tables(trace, cp, max_steps=5)
    assert len(tables["valid_steps"]) == 5
    assert tables["valid_steps"][0] == "step#0" and tables["valid_steps"][-1] == tables["steps"][-1]["name"]
    for name in tables["valid_steps"]:
        direct = path_table(critical_path(trace, step=name))
        stored = tables["step_paths"][name]
        assert stored["length_us"] == direct["length_us"]
        assert stored["rows"] == direct["rows"]
        assert stored["least_slack"] == direct["least_slack"]


def test_step_paths_stay_within_their_event_budget_and_keep_the_middle_step(emulated):
    trace, cp = emulated
    steps = step_list(trace)
    tables = path_tables(trace, cp, max_step_events=1)
    assert tables["valid_steps"] == [steps[len(steps) // 2]["name"]]
    roomy = path_tables(trace, cp, max_steps=4, max_step_events=10**9)
    assert len(roomy["valid_steps"]) == 4
    assert roomy["valid_steps"] == sorted(roomy["valid_steps"], key=lambda n: int(n.split("#")[1]))
