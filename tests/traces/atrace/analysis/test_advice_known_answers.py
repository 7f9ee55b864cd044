"""The advisor on traces with one known problem each: every rule fires on its trace with a
saving within 10 % of the injected time, and stays silent on the clean twins and on the
other rules' traces (known_answers.py builds them)."""

from __future__ import annotations

import numpy as np
import pytest

from tests.traces.atrace.analysis import known_answers as ka
from traces.atrace import advise, advise_job, analyse_job, correlate, critical_path
from traces.atrace.analysis.advice import VERDICTS
from traces.atrace.model.trace import FLAG_LAUNCH, Kind

SINGLE = [p for p in ka.PROBLEMS if p != "graph_replays"]


@pytest.fixture(scope="module")
def cases():
    out = {p: ka.single(p) for p in SINGLE}
    out["graph_replays"] = ka.graph_loop(host_ahead=False)
    return out


@pytest.fixture(scope="module")
def clean():
    return {
        "clean": ka.single(None),
        "clean communication": ka.single("clean_communication"),
        "clean graph loop": ka.graph_loop(host_ahead=True),
    }


@pytest.mark.parametrize("problem", ka.PROBLEMS)
def test_each_rule_fires_with_the_injected_size(cases, problem):
    case = cases[problem]
    found = advise(case.trace)
    f = found.rule(problem)
    assert f is not None, f"{problem} not found: {found.rules}"
    injected = case.injected_ns * ka.STEPS
    assert abs(f.saving_ns - injected) <= 0.10 * injected, (f.saving_ns, injected)
    assert abs(f.saving_per_step_ns - case.injected_ns) <= 0.10 * case.injected_ns
    # Only that rule: the others stay silent on it.
    assert found.rules == [problem]
    d = f.to_dict()
    assert d["title"] and d["action"] and d["severity"] in ("high", "medium", "low")
    assert d["evidence"]["events"] and d["evidence"]["steps"] and d["evidence"]["operators"]
    a, b = d["evidence"]["focus_us"]
    assert a < b


@pytest.mark.parametrize("name", ["clean", "clean communication", "clean graph loop"])
def test_clean_twins_have_no_finding(clean, name):
    found = advise(clean[name].trace)
    assert found.findings == [], found.rules
    assert found.verdict == "device-bound"


def test_the_saving_is_a_what_if_not_the_raw_total(cases):
    """The host waits about 1.5 ms per step in the injected .item(), but only the 300 µs of
    host work after it could overlap the device: the saving is those, not the wait."""
    case = cases["host_sync"]
    f = advise(case.trace).rule("host_sync")
    assert f.measured["wait_per_step_us"] > 4 * case.injected_ns / 1000
    assert f.saving_per_step_ns < 1.1 * case.injected_ns
    # And it is bounded by the critical path: never more than its length.
    path = sum(critical_path(case.trace, step=k).length_ns for k in range(ka.STEPS))
    assert f.saving_ns <= path


def test_verdicts(cases, clean):
    assert advise(cases["launch_bound"].trace).verdict == "host-bound"
    assert advise(cases["kernel_hotspot"].trace).verdict == "device-bound"
    assert advise(clean["clean"].trace).verdict == "device-bound"
    assert advise(cases["graph_replays"].trace).verdict == "host-bound"
    assert set(advise(cases["input_stall"].trace).shares) == {"host", "device", "communication", "input"}
    assert all(advise(c.trace).verdict in VERDICTS for c in cases.values())


def test_findings_are_deterministic(cases):
    a = advise(cases["copies"].trace).to_dict()
    b = advise(cases["copies"].trace).to_dict()
    assert a == b


# -- rule 8: graph replays are attributed to their launch --------------------------------
@pytest.mark.parametrize("link", ["correlation", "external", "args"])
def test_graph_kernels_belong_to_the_graph_launch(link):
    case = ka.graph_loop(host_ahead=False, link=link)
    t = case.trace
    c = correlate(t)
    assert c.unmatched_device == 0
    launches = np.flatnonzero(t.name == t.find_name("cudaGraphLaunch"))
    kernels = np.flatnonzero(t.kind == Kind.KERNEL)
    assert len(kernels) == 50 * ka.STEPS
    assert set(c.launcher.tolist()) == set(launches.tolist())
    assert (t.flags[launches] & FLAG_LAUNCH).all()
    # Each replay's 50 kernels to its launch, which precedes them.
    for launch in launches.tolist():
        mine = c.device_events[c.launcher == launch]
        assert len(mine) == 50 and (t.ts[mine] >= t.ts[launch]).all()
    found = advise(t)
    assert found.rules == ["graph_replays"]
    assert "graph" in found.rule("graph_replays").title


# -- rule 7: stragglers ----------------------------------------------------------------
def test_the_straggler_is_found_with_the_waiting_it_causes():
    traces, late = ka.straggler_job(late_us=500, straggler=2)
    found = advise_job(analyse_job(traces))
    f = found.rule("straggler")
    assert f is not None and f.rank == 2
    injected = late * ka.STEPS
    assert abs(f.saving_ns - injected) <= 0.10 * injected
    m = f.measured
    assert m["straggler_rank"] == 2 and m["last_share"] == 1.0
    # Three ranks wait about 500 µs at each of the four collectives.
    assert abs(m["waiting_total_us"] - 3 * 500 * ka.STEPS) <= 0.1 * 3 * 500 * ka.STEPS
    assert set(m["waiting_per_step_us"]) == {f"ProfilerStep#{k}" for k in range(ka.STEPS)}
    assert all(abs(v - 1500) <= 150 for v in m["waiting_per_step_us"].values())
    assert len(m["per_collective"]) == ka.STEPS
    assert all(row["last_rank"] == 2 and abs(row["skew_us"] - 500) <= 50 for row in m["per_collective"])
    # The others' exposed communication is their waiting for rank 2: no finding of its own.
    assert found.rules == ["straggler"]


def test_no_straggler_no_finding():
    traces, _ = ka.straggler_job(late_us=0)
    found = advise_job(analyse_job(traces))
    assert found.findings == [] and found.verdict == "device-bound"
    assert found.scope["ranks"] == [0, 1, 2, 3]


@pytest.mark.parametrize("link", ["external", "args"])
def test_graph_replays_count_as_launched_in_the_exact_reference_too(tmp_path, link):
    """The independent reference (exact.py) agrees: replayed work is not unlaunched, in a
    Kineto file that links it by external id or graph args only."""
    from tests.traces.atrace import exact
    from traces.atrace import read_trace, write_chrome_trace

    t = ka.graph_loop(host_ahead=False, link=link).trace
    t.corr[t.kind == Kind.KERNEL] = -1
    path = tmp_path / "graphs.json"
    write_chrome_trace(t, path)
    raw = exact.load_raw(path)
    for e in raw["traceEvents"]:  # as a tracer that writes no ac2g arrows for replays
        if e.get("cat") == "kernel":
            e.get("args", {}).pop("correlation", None)
    raw["traceEvents"] = [e for e in raw["traceEvents"] if e.get("cat") != "ac2g"]
    path.write_text(__import__("json").dumps(raw, default=str))
    ref = exact.slices(exact.load_raw(path))
    again = read_trace(path)
    assert exact.unlaunched_device_work(ref) == correlate(again).unmatched_device == 0


def test_a_straggler_between_two_ranks():
    """With two ranks the other's lateness is the yardstick (a median of both could never be
    exceeded twice over)."""
    traces, late = ka.straggler_job(late_us=500, straggler=1, ranks=2)
    f = advise_job(analyse_job(traces)).rule("straggler")
    assert f is not None and f.rank == 1
    assert abs(f.saving_ns - late * ka.STEPS) <= 0.10 * late * ka.STEPS
