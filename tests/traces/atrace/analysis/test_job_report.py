"""A job analysed rank by rank (digests), then across ranks: the same answers as the
multi-rank analysis of the whole traces, the arrival skew and the path through the last
arrivals."""

from __future__ import annotations

import dataclasses
import json

import pytest

from emulator import EmulatedHost, FleetConfig
from emulator.workloads.jobs import emulated_conditions, make_job, run_job, select_devices
from tests.support.traces import real_trace
from traces.atrace.analysis.advice import DEFAULT_ADVICE_LIMITS, advise_job
from traces.atrace.analysis.advice.job import straggler_rule
from traces.atrace.analysis.job_digest import digest_bytes, rank_digest, read_digest
from traces.atrace.analysis.job_report import job_report, timeline_arrays
from traces.atrace.analysis.multirank import analyse_job
from traces.atrace.io.jobs import read_job

SHARED = ("multirank_sampled_rank0.json.gz", "multirank_sampled_rank1.json.gz", "ddp_nccl_rank0.json.gz")
T0 = 1_700_000_000.0
VICTIM = 3


def _digests(traces):
    return [read_digest(digest_bytes(rank_digest(t))) for t in traces]


@pytest.fixture
def shared() -> list:
    """Two ranks of a sampled multi-rank job and a DDP rank (skipped without the real traces)."""
    return [real_trace(name) for name in SHARED]


def test_digests_give_the_same_answers_as_the_whole_traces(shared):
    traces = read_job(shared)
    whole = analyse_job(traces).to_dict()
    report, job = job_report(_digests(read_job(shared)))
    assert report["ranks"] == whole["ranks"] == [0, 1, 2]
    assert report["match_rule"] == whole["match_rule"]
    assert report["collectives_matched"] == whole["collectives_matched"] > 0
    for mine, theirs in zip(report["per_rank"], whole["per_rank"]):
        assert {k: mine[k] for k in theirs} == theirs
    assert report["side_by_side"] == whole["side_by_side"]
    assert report["stragglers"] == whole["stragglers"]
    json.dumps(report)


@pytest.fixture(scope="module")
def overheated_job():
    fleet = FleetConfig(seed=1, hosts=2, devices_per_host=4, types=("gpu",))
    spec = make_job("bert", select_devices(fleet))
    spec = dataclasses.replace(spec, ranks=tuple(dataclasses.replace(r, sw_version="2.0") for r in spec.ranks))
    hosts = {h: EmulatedHost(fleet, h) for h in spec.hosts}
    for h in hosts.values():
        h.sync(T0 - 900)
        for r in spec.ranks:
            if r.host == h.name:
                h.occupy(r.serial, T0 + 60)
    hosts[spec.ranks[VICTIM].host].inject_fault(spec.ranks[VICTIM].serial, "overheat")
    capture = run_job(spec, 2.0, emulated_conditions(hosts), start_s=T0, seed=7)
    return [capture.traces[r] for r in sorted(capture.traces)]


def test_the_path_runs_on_the_straggler_and_the_others_wait_for_it(overheated_job):
    report, job = job_report(_digests(overheated_job))
    path = report["critical_path"]
    on = {int(r): v for r, v in path["ranks_on_path"].items()}
    assert on[VICTIM] > 0.9 * sum(on.values())
    assert path["length_us"] == pytest.approx(report["window_us"][1] - report["window_us"][0], rel=0.01)
    assert path["device_busy_share_on_path"][str(VICTIM)] > 0.8  # it was computing, slowly
    # Segments tile the path: each starts where the one before ended.
    segs = path["segments"]
    assert all(a["end_us"] == pytest.approx(b["start_us"]) for a, b in zip(segs, segs[1:]))
    assert {s["rank"] for s in segs if s["kind"] == "transfer"} == {VICTIM}
    rows = {row["rank"]: row for row in report["per_rank"]}
    assert rows[VICTIM]["waiting_us"] < min(r["waiting_us"] for k, r in rows.items() if k != VICTIM) / 5
    assert all(row["last_rank"] == VICTIM and row["margin_us"] > 0 for row in report["skew"])
    assert [r["rank"] for r in report["stragglers"] if r["straggler"]] == [VICTIM]
    # The advisor's straggler rule reads the slim traces as it reads whole ones.
    (whole,) = [f for f in advise_job(analyse_job(overheated_job)).findings if f.rule == "straggler"]
    slim, _ = straggler_rule(job, DEFAULT_ADVICE_LIMITS, round((report["window_us"][1] - report["window_us"][0]) * 1000))
    assert slim.rank == whole.rank == VICTIM
    assert slim.measured["waiting_total_us"] == whole.measured["waiting_total_us"]
    assert slim.saving_ns == pytest.approx(whole.saving_ns, rel=0.02)
    arrays = timeline_arrays(job)
    assert arrays["start"].shape == (len(job.collectives), len(job.ranks))
    assert (arrays["last"] == VICTIM).all() and (arrays["end"] >= arrays["start"]).all()


def test_path_through_one_collective_of_two_ranks(tmp_path):
    """Rank 0 computes long and arrives last; rank 1 works long after the collective: the
    path is rank 0's work, the transfer, then rank 1's work."""
    from tests.traces.atrace.analysis.test_multirank import _two_ranks

    report, _ = job_report(_digests(read_job(_two_ranks(tmp_path, True))))
    kinds = [(s["kind"], s["rank"]) for s in report["critical_path"]["segments"]]
    assert kinds == [("work", 0), ("transfer", 0), ("work", 1)]
    assert report["critical_path"]["hops"] == 1
