"""Software versions: the emulated 2.1 release slows one operator; comparison and the
versions view find it, and two traces of one version flag nothing."""

from __future__ import annotations

import pytest

from emulator.config import FleetConfig, fleet_layout
from emulator.workloads.tracing import capture
from traces.atrace import compare_traces, operator_breakdown
from traces.atrace.analysis.comparison import compare_tables, op_table
from traces.atrace.analysis.paths.tables import path_tables, step_list
from traces.atrace.analysis.versions import (
    op_means,
    step_regressions,
    step_time,
    version_key,
    version_regressions,
)
from traces.atrace.render.page_data import (
    PageLimits,
    compute_page_data,
    load_document,
    load_timeline,
)

DURATION_S = 0.04
LIMITS = PageLimits(flame_nodes=5000, path_rows=200, least_slack=20, steps=4, step_events=250_000,
                    correlation_bins=200, launched_by=20)


@pytest.fixture(scope="module")
def gpu_traces():
    """Two captures (different seeds, as two devices would give) of each of 2.0 and 2.1."""
    return {
        (version, seed): capture("gpu", DURATION_S, sw_version=version, seed=seed)
        for version in ("2.0", "2.1")
        for seed in (1, 2)
    }


def _record(trace, version, ident):
    return {"id": ident, "version": version, "ops": op_means(operator_breakdown(trace))}


def test_the_emulated_fleet_mixes_software_versions_within_each_device_type():
    versions: dict[str, set[str]] = {}
    for host in fleet_layout(FleetConfig()):
        for device in host.devices:
            versions.setdefault(device.type, set()).add(device.sw_version)
    assert versions and all({"2.0", "2.1"} <= v for v in versions.values()), versions


def test_regression_flag_finds_the_operator_the_new_version_slowed(gpu_traces):
    records = [_record(t, v, f"{v}-{s}") for (v, s), t in gpu_traces.items()]
    result = version_regressions(records)
    assert result["versions"] == ["2.0", "2.1"]
    flagged = [(r["side"], r["op"]) for r in result["regressions"]]
    assert flagged == [("device", "bmm")]
    bmm = result["regressions"][0]
    assert bmm["delta_pct"] > 100 and bmm["delta_us"] > bmm["noise_us"]
    assert result["rows"][0]["op"] == "bmm" and result["rows"][0]["flagged"]


def test_two_traces_of_one_version_flag_nothing(gpu_traces):
    # Once grouped as one version, and once labelled as two releases of the same software.
    same = [_record(gpu_traces[("2.0", s)], "2.0", s) for s in (1, 2)]
    assert version_regressions(same)["regressions"] == []
    relabelled = [_record(gpu_traces[("2.0", 1)], "2.0", 1), _record(gpu_traces[("2.0", 2)], "2.0.1", 2)]
    result = version_regressions(relabelled)
    assert result["versions"] == ["2.0", "2.0.1"]
    assert result["regressions"] == []


def test_versions_sort_numerically():
    assert sorted(["2.10", "2.9", "1.5", "2.0-rc1", "2.0"], key=version_key) == [
        "1.5", "2.0", "2.0-rc1", "2.9", "2.10"
    ]


def _table(trace):
    paths = path_tables(trace, max_steps=3)
    mid = paths["valid_steps"][len(paths["valid_steps"]) // 2]
    return op_table(operator_breakdown(trace), len(paths["steps"]), paths["step_paths"][mid], "one step")


def test_comparison_from_stored_tables_ranks_the_slowed_operator_first(gpu_traces):
    a, b = gpu_traces[("2.0", 1)], gpu_traces[("2.1", 2)]
    result = compare_tables(_table(a), _table(b), labels=("2.0", "2.1"))
    top = result["rows"][0]
    assert (top["side"], top["op"]) == ("device", "bmm")
    assert top["delta_us"] > 0 and top["mean_b_us"] > 2 * top["mean_a_us"]
    # The same figures as the engine's comparison of the loaded traces.
    engine = next(r for r in compare_traces(a, b).to_dict()["rows"] if r["op"] == "bmm")
    assert (engine["delta_us"], engine["count_a"], engine["count_b"]) == (
        top["delta_us"], top["count_a"], top["count_b"]
    )
    # Waits grow with the slower device; they are listed apart, not ranked as operators.
    assert any("Synchronize" in r["op"] for r in result["waits"])
    assert not any("Synchronize" in r["op"] for r in result["rows"])
    assert result["critical_path"]["scope"] == "one step"
    bmm_path = next(r for r in result["critical_path"]["by_op"] if r["op"] == "bmm")
    assert bmm_path["delta_us"] > 0
    by_path = compare_tables(_table(a), _table(b), rank="path")
    assert by_path["rows"][0]["path_delta_us"] == max(
        (r["path_delta_us"] for r in by_path["rows"] if r["path_delta_us"] is not None), key=abs
    )


@pytest.mark.slow  # analyses four recorded traces twice over: seconds of CPU (make test runs it, make test-fast does not)
def test_new_and_vanished_operators_are_tables_and_python_frames_stay_out(gpu_traces, torch_traces):
    from traces.atrace import read_trace

    gpu = gpu_traces[("2.0", 1)]
    video = capture("video", DURATION_S, seed=1)
    result = compare_tables(_table(gpu), _table(video))
    new_ops = {(r["side"], r["op"]) for r in result["new"]}
    gone_ops = {(r["side"], r["op"]) for r in result["vanished"]}
    assert ("device", "decode") in new_ops and ("device", "layer_norm") in gone_ops
    assert all(r["count"] > 0 and r["total_us"] > 0 for r in result["new"] + result["vanished"])
    # A trace recorded with Python stacks: frames out at the operator level, in with 'all'.
    torch_trace = read_trace(torch_traces["mlp"])
    table = op_table(operator_breakdown(torch_trace), 3, None, "whole trace")
    kinds = {kind for _, kind, *_ in table["ops"]}
    operator_level = compare_tables(table, table)
    everything = compare_tables(table, table, level="all")
    assert all(r["delta_us"] == 0 for r in everything["rows"])
    if "python" in kinds:
        assert len(everything["rows"]) > len(operator_level["rows"])
    assert any(r["op"].startswith("aten::") for r in operator_level["rows"])
    with pytest.raises(ValueError, match="level must be one of"):
        compare_tables(table, table, level="frames")


def test_compute_views_stores_every_view_and_reads_them_back(gpu_traces, tmp_path):
    trace = gpu_traces[("2.1", 1)]
    views = compute_page_data(trace, LIMITS)
    files = views.save(tmp_path)
    assert "view.flame.json" in files and "view.timeline.ts.npy" in files
    assert sorted(p.name for p in tmp_path.iterdir()) == files  # flat, all named view.*
    assert load_document(tmp_path, "paths")["valid_steps"] == views.documents["paths"]["valid_steps"]
    assert len(load_document(tmp_path, "paths")["valid_steps"]) == 4
    assert load_document(tmp_path, "op_means")["device/bmm"]["count"] > 0
    assert load_document(tmp_path, "flame")["device"]["labels"]
    assert load_document(tmp_path, "correlation")["matched"] > 0
    assert len(load_timeline(tmp_path)) == int(trace.is_slice.sum())
    with pytest.raises(KeyError, match="no view named"):
        load_document(tmp_path, "secrets")


def test_page_data_keeps_within_the_limits_it_is_given(gpu_traces):
    trace = gpu_traces[("2.0", 1)]
    tight = PageLimits(flame_nodes=40, path_rows=5, least_slack=3, steps=2, step_events=250_000,
                       correlation_bins=30, launched_by=4)
    docs = compute_page_data(trace, tight).documents
    assert all(len(docs["flame"][side]["ids"]) <= 40 for side in ("host", "device"))
    paths = docs["paths"]
    assert len(paths["valid_steps"]) == 2
    for table in [paths["whole"], *paths["step_paths"].values()]:
        assert len(table["rows"]) == 5 and table["rows_truncated"]
        assert len(table["least_slack"]) == 3
    assert len(docs["correlation"]["states_over_time"]["idle"]) == 30
    assert len(docs["correlation"]["launched_by"]) == 4
    roomy = compute_page_data(trace, LIMITS).documents
    assert len(roomy["paths"]["whole"]["rows"]) > 5 and len(roomy["correlation"]["launched_by"]) > 4


@pytest.fixture()
def release_5pct_slower(monkeypatch):
    """A release 2.2 whose GELU is 2.4 times slower: the GPU's step gets about 5 % longer."""
    import dataclasses

    from emulator.workloads import graph as workloads

    gpu = workloads.COST_PROFILES["gpu"]
    monkeypatch.setitem(workloads.COST_PROFILES, "gpu",
                        dataclasses.replace(gpu, sw_regressions={**gpu.sw_regressions, "2.2": {"gelu": 2.42}}))


def _step_record(version, seed):
    trace = capture("gpu", DURATION_S, sw_version=version, seed=seed)
    return {"id": f"{version}-{seed}", "version": version, "ops": op_means(operator_breakdown(trace)),
            **step_time(step_list(trace))}


def test_a_5_percent_slower_step_is_flagged_with_the_operator_that_slowed(release_5pct_slower):
    records = [_step_record(v, s) for v in ("2.0", "2.2") for s in (1, 2)]
    (change,) = step_regressions(records, version_regressions(records))
    assert (change["from"], change["to"]) == ("2.0", "2.2")
    assert 4 < change["delta_pct"] < 6 and change["flagged"]
    assert change["delta_us"] > 5 * change["noise_us"]
    assert [r["op"] for r in change["responsible"]] == ["gelu"]
    assert change["responsible"][0]["added_per_step_us"] > 0.5 * change["delta_us"]


def test_captures_of_one_version_are_not_a_step_regression():
    same = [_step_record("2.0", s) for s in (1, 2, 3)]
    relabelled = [{**r, "version": "2.0.1"} if k == 2 else r for k, r in enumerate(same)]
    (change,) = step_regressions(relabelled, version_regressions(relabelled))
    assert not change["flagged"] and change["responsible"] == []
    # One capture of each version: the noise is unknown, so nothing is flagged.
    (alone,) = step_regressions(same[:1] + relabelled[2:])
    assert alone["noise_us"] is None and not alone["flagged"]


def test_step_time_is_the_median_step_and_none_without_steps():
    assert step_time([]) is None
    trace = capture("gpu", DURATION_S, seed=1)
    found = step_time(step_list(trace))
    assert found["steps"] == trace.meta["steps"]
    assert 400 < found["step_us"] < 1000
