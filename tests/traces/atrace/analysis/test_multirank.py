"""Distributed jobs: reading ranks, matching collectives, skew, stragglers, cross-rank path."""

from __future__ import annotations

import tarfile
import zipfile

import numpy as np
import pytest

from tests.support.traces import real_trace
from traces.atrace import read_trace
from traces.atrace.analysis.multirank import (
    RULE_NAME_ORDER,
    RULE_PG_SEQ,
    analyse_job,
    cross_rank_critical_path,
    merge_ranks,
)
from traces.atrace.io.jobs import read_job

RANKS = 4
STRAGGLER = 2


def _job(folder, with_args):
    for r in range(RANKS):
        write = __import__("tests.support.tracegen", fromlist=["write_kineto_trace"]).write_kineto_trace
        write(folder / f"trace_rank{r}.json", 5000, seed=10 + r, rank=r, world_size=RANKS, layers=3,
              collective_args=with_args, straggle_us=300.0 if r == STRAGGLER else 0.0)
    return folder


@pytest.fixture(scope="module", params=[True, False], ids=["pg+seq args", "no args"])
def job(request, tmp_path_factory):
    folder = _job(tmp_path_factory.mktemp("job"), request.param)
    return request.param, folder, analyse_job(read_job(folder))


def test_collectives_match_by_the_rule_the_args_allow(job):
    with_args, _, j = job
    assert j.ranks == list(range(RANKS))
    assert j.rule == (RULE_PG_SEQ if with_args else RULE_NAME_ORDER)
    steps = len([n for n in j.traces[0].strings.strings if n.startswith("ProfilerStep#")])
    assert len(j.collectives) == steps > 0
    assert all(sorted(c.members) == list(range(RANKS)) for c in j.collectives)
    keys = [c.key for c in j.collectives]
    assert len(set(keys)) == len(keys)


def test_skew_and_stragglers_name_the_late_rank(job):
    _, _, j = job
    assert all(row["last_rank"] == STRAGGLER for row in j.skew())
    assert all(row["skew_us"] >= 300 for row in j.skew())
    top = j.stragglers()[0]
    assert top["rank"] == STRAGGLER and top["straggler"] and top["last_share"] == 1.0
    assert sum(row["straggler"] for row in j.stragglers()) == 1
    d = j.to_dict()
    assert d["match_rule"] == j.rule and len(d["per_rank"]) == RANKS and d["side_by_side"]


def _x(name, cat, ts, dur, pid, tid, **args):
    return {"ph": "X", "name": name, "cat": cat, "ts": ts, "dur": dur, "pid": pid, "tid": tid, "args": args}


def _two_ranks(tmp_path, with_args):
    """Rank 0 computes long, then joins the all-reduce; rank 1 arrives early, waits, and has
    long work after it: only a path through the collective holds both."""
    import json

    kernel = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"
    extra = {"Process Group Name": "0", "Seq": 1, "Collective name": "allreduce"} if with_args else {}
    plans = {0: (1000, 0), 1: (100, 500)}  # rank: (compute before, compute after) in us
    for r, (before, after) in plans.items():
        events = [
            _x("aten::mm", "cpu_op", 0, before, 1, 1),
            _x("cudaLaunchKernel", "cuda_runtime", before, 5, 1, 1, correlation=1),
            _x(kernel, "kernel", before + 10, 1100 - before - 10, 0, 9, correlation=1, stream=9, **extra),
            _x("cudaStreamSynchronize", "cuda_runtime", before + 5, 1100 - before - 4, 1, 1, correlation=2),
            _x("aten::add", "cpu_op", 1102, after, 1, 1),
        ]
        (tmp_path / f"rank{r}.json").write_text(json.dumps(
            {"distributedInfo": {"rank": r}, "baseTimeNanoseconds": 1_700_000_000_000_000_000,
             "traceEvents": events}))
    return tmp_path


@pytest.mark.parametrize("with_args", [True, False], ids=["pg+seq args", "no args"])
def test_cross_rank_path_goes_through_the_late_rank_and_the_collective(tmp_path, with_args):
    j = analyse_job(read_job(_two_ranks(tmp_path, with_args)))
    assert j.rule == (RULE_PG_SEQ if with_args else RULE_NAME_ORDER)
    assert len(j.collectives) == 1 and j.collectives[0].last_rank == 0
    cp = cross_rank_critical_path(j)
    assert "collective" in cp.via
    names = cp.trace.names(cp.events)
    assert names[0] == "aten::mm" and names[-1] == "aten::add"
    assert cp.extra["rank_hops"] == [(0, 1)]
    # rank 0's 1000 us of compute, then rank 1's 500 us after the collective.
    assert cp.length_ns >= 1_500_000
    assert cp.bounds_ns["host"] >= 1_500_000


def test_cross_rank_critical_path_of_a_generated_job_is_valid(job):
    _, _, j = job
    cp = cross_rank_critical_path(j)
    merged, first, track_rank = merge_ranks(j)
    assert cp.extra["match_rule"] == j.rule and cp.extra["collective_edges"] > 0
    # Every collective hop runs from the last arrival to another rank's member, forward.
    trace = cp.trace
    rank = track_rank[trace.track]
    for a, b, via in cp.edges:
        assert trace.ts[a] <= trace.end[b]
        if via == "collective":
            assert rank[a] != rank[b]
            assert trace.kind[a] == trace.kind[b] and trace.ts[a] <= trace.ts[b]
        elif via in ("sequence", "nested", "launch", "sync", "queue"):
            assert rank[a] == rank[b], "ranks meet only at collectives"
    assert float(cp.extra["ranks_on_path"][str(STRAGGLER)]) > 0
    # The waits of early ranks are not work on the path.
    assert not np.isin(trace.names(cp.events), ["wait for the last rank"]).any()


@pytest.mark.slow  # over 1.5 s on 2 cores: in make test, out of make test-fast
def test_a_job_reads_from_a_folder_a_list_and_archives(job, tmp_path):
    _, folder, j = job
    files = sorted(folder.glob("*.json"))
    with tarfile.open(tmp_path / "job.tar.gz", "w:gz") as tar:
        for f in files:
            tar.add(f, arcname=f"job/{f.name}")
    with zipfile.ZipFile(tmp_path / "job.zip", "w") as z:
        for f in files:
            z.write(f, arcname=f.name)
    for source in (files[::-1], tmp_path / "job.tar.gz", tmp_path / "job.zip"):
        again = read_job(source)
        assert [t.meta["rank"] for t in again] == j.ranks
        assert [len(t) for t in again] == [len(t) for t in j.traces]


def test_shared_sampled_ranks_load_with_per_rank_summaries():
    files = [real_trace(f"multirank_sampled_rank{r}.json.gz") for r in (1, 0)]
    j = analyse_job(read_job(files))
    assert j.ranks == [0, 1]
    rows = j.per_rank()
    for row, f in zip(rows, files[::-1]):
        single = read_trace(f)
        assert row["events"] == len(single) and row["span_us"] > 0
        assert row["top_device_ops"]
    assert j.side_by_side(top=5)
    # Sampled, without process-group args: matched by name and order, and it says so.
    assert j.rule == RULE_NAME_ORDER
    d = j.to_dict()
    assert d["match_rule"] == RULE_NAME_ORDER and len(d["stragglers"]) == 2


def test_job_command(job, capsys):
    from traces.atrace.cli import main

    _, folder, j = job
    assert main(["job", str(folder), "--json"]) == 0
    import json

    data = json.loads(capsys.readouterr().out)
    assert data["match_rule"] == j.rule and data["critical_path"]["match_rule"] == j.rule
    assert main(["job", str(folder)]) == 0
    assert "Stragglers" in capsys.readouterr().out


def _cut_window_job(tmp_path, gpu: bool):
    """Two ranks stepping together, rank 1 arriving 30 ms late at each step's all-reduce;
    the capture window opened while rank 0 already waited in one, so that collective is in
    rank 1's trace only. On CPU ranks the collectives are gloo's host annotations (as a real
    gloo job's traces have them), on GPU ranks NCCL kernels."""
    import json

    step, late = 100_000, 30_000  # us
    name = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)" if gpu else "gloo:all_reduce"
    for r in (0, 1):
        events = []
        for k in range(8):
            if r == 0 and k == 0:
                continue  # began before the window: not in rank 0's trace
            t = 10_000 + k * step
            arrive = t + (late if r == 1 else 0)
            leave = t + late + 500
            events.append(_x("aten::mm", "cpu_op", arrive - 5_000, 4_000, 1, 1))
            if gpu:
                events.append(_x(name, "kernel", arrive, leave - arrive, 0, 7, stream=7))
            else:
                events.append(_x(name, "user_annotation", arrive, leave - arrive, 1, 2 + k % 2))
        (tmp_path / f"rank{r}.json").write_text(json.dumps({"distributedInfo": {"rank": r}, "traceEvents": events}))
    return tmp_path


@pytest.mark.parametrize("gpu", [True, False], ids=["nccl kernels", "gloo on the host"])
def test_a_collective_cut_by_the_window_on_one_rank_does_not_shift_the_others(tmp_path, gpu):
    from traces.atrace.analysis.job_digest import rank_digest
    from traces.atrace.analysis.job_report import job_report

    traces = read_job(_cut_window_job(tmp_path, gpu))
    report, j = job_report([rank_digest(t, rank) for rank, t in enumerate(traces)])
    assert j.rule == RULE_NAME_ORDER and len(j.collectives) == 7
    assert {c.last_rank for c in j.collectives} == {1}  # unaligned, rank 0 looked last at every one
    assert all(abs(c.end_ns[0] - c.end_ns[1]) < 1_000 for c in j.collectives)
    assert 29_000 < report["skew_summary"]["median_us"] < 31_000


def test_ranks_whose_ends_disagree_everywhere_keep_their_order(tmp_path):
    """No shift makes the ends agree much better (clocks apart, or unrelated ranks): none."""
    from traces.atrace.analysis.multirank import _best_shift

    assert _best_shift([100, 200, 300, 400, 500], [105, 210, 290, 420, 480]) == 0
    assert _best_shift([100, 200, 300, 400, 500], [0, 101, 200, 299, 401, 500]) == 1
    assert _best_shift([100, 200, 300, 400, 500], [7_000, 9_000, 11_000, 13_000]) == 0
