"""Distributed jobs on emulated devices: a faulty device really slows the job, and Atrace's
multi-rank analysis names it from the traces alone."""

from __future__ import annotations

import dataclasses

import pytest

from emulator import EmulatedHost, FleetConfig
from emulator.workloads.jobs import (
    JobSpec,
    Rank,
    condition_of,
    emulated_conditions,
    make_job,
    run_job,
    run_job_live,
    select_devices,
    transfer_ns,
)
from emulator.workloads.training import training_step
from traces.atrace import write_chrome_trace
from traces.atrace.analysis.multirank import RULE_PG_SEQ, analyse_job
from traces.atrace.io.jobs import read_job
from traces.atrace.model.trace import Kind

T0 = 1_700_000_000.0  # 22:13 UTC
QUIET = 1_700_015_120.0  # 02:25 UTC: the fleet serves at its lowest demand (about 0.2)
FLEET = FleetConfig(seed=1, hosts=2, devices_per_host=8, types=("gpu",))
VICTIM = 5


def _job(size: int = 16, parallelism: str = "data", slow_rank: int | None = None) -> JobSpec:
    """A job over ``size`` devices of the two hosts, every rank on software 2.0 except a
    ``slow_rank`` on 2.1 (the release that regressed)."""
    per_host = size // 2
    devices = [d for h in ("host-00", "host-01") for d in select_devices(FLEET, hosts=[h])[:per_host]]
    spec = make_job("train-bert", devices, parallelism)
    ranks = [dataclasses.replace(r, sw_version="2.1" if r.rank == slow_rank else "2.0") for r in spec.ranks]
    return dataclasses.replace(spec, ranks=tuple(ranks))


def _hosts(spec: JobSpec, *, at: float, fault: str | None = None, running_s: float = 900) -> dict:
    """The job's hosts, the job running on their devices for ``running_s`` before ``at``,
    with ``fault`` injected on rank VICTIM's device when the job started."""
    hosts = {name: EmulatedHost(FLEET, name) for name in spec.hosts}
    for h in hosts.values():
        h.sync(at - running_s)
    for r in spec.ranks:
        hosts[r.host].occupy(r.serial, at + 60)
    if fault:
        victim = spec.ranks[VICTIM]
        hosts[victim.host].inject_fault(victim.serial, fault)
    for h in hosts.values():
        h.advance(at)
    return hosts


def _analyse(capture, folder):
    """Write each rank's trace as Kineto JSON, read the folder back as a job, analyse it."""
    for rank, trace in capture.traces.items():
        write_chrome_trace(trace, folder / f"train-bert_rank{rank}.json.gz")
    return analyse_job(read_job(folder))


def _stragglers(job) -> list[int]:
    return [row["rank"] for row in job.stragglers() if row["straggler"]]


def test_a_healthy_job_has_matched_collectives_and_no_straggler(tmp_path):
    spec = _job(16)
    capture = run_job(spec, 1.5, emulated_conditions(_hosts(spec, at=T0)), start_s=T0, seed=1)
    assert sorted(capture.traces) == list(range(16)) and not capture.failed
    job = _analyse(capture, tmp_path)
    assert job.ranks == list(range(16))
    assert job.rule == RULE_PG_SEQ  # the collectives carry process group and sequence number
    per_step = len(training_step("gpu", "data", 16).collectives())
    assert len(job.collectives) == capture.steps_kept * per_step > 0
    assert all(len(c.members) == 16 for c in job.collectives)
    assert _stragglers(job) == []
    # Every rank was traced over the same window.
    for trace in job.traces:
        start, end = trace.span()
        assert T0 * 1e9 <= start < T0 * 1e9 + 0.1e9 and end > (T0 + 1.0) * 1e9


@pytest.mark.parametrize("fault", ["overheat", "pcie_degraded", "ecc_storm", "software 2.1"])
@pytest.mark.slow  # over 1.5 s on 2 cores: in make test, out of make test-fast
def test_the_faulty_device_is_named_as_the_straggler(tmp_path, fault):
    slow = fault == "software 2.1"
    spec = _job(8, slow_rank=VICTIM if slow else None)
    hosts = _hosts(spec, at=T0, fault=None if slow else fault)
    capture = run_job(spec, 1.5, emulated_conditions(hosts), start_s=T0, seed=2)
    job = _analyse(capture, tmp_path)
    assert _stragglers(job) == [VICTIM]
    top = job.stragglers()[0]
    assert top["rank"] == VICTIM and top["last_share"] >= 0.75
    healthy = capture.steps_run
    again = run_job(_job(8), 1.5, emulated_conditions(_hosts(spec, at=T0)), start_s=T0, seed=2)
    assert healthy < again.steps_run  # the whole job went slower, not only that rank


def test_the_slowdown_comes_from_the_device_state():
    spec = _job(8)
    victim = spec.ranks[VICTIM]
    hot = condition_of(_hosts(spec, at=T0, fault="overheat")[victim.host].state(victim.serial))
    assert hot.clock_share < 0.8  # the physics throttled the clock
    link = condition_of(_hosts(spec, at=T0, fault="pcie_degraded")[victim.host].state(victim.serial))
    assert link.link_share < 0.1 and link.clock_share == 1.0
    ecc = condition_of(_hosts(spec, at=T0, fault="ecc_storm")[victim.host].state(victim.serial))
    assert ecc.ecc_per_s > 100
    # An overheating device that just joined the job has not heated up yet: no slowdown.
    cold = _hosts(spec, at=QUIET, fault="overheat", running_s=1)
    assert condition_of(cold[victim.host].state(victim.serial)).clock_share == 1.0


def test_job_load_heats_an_overheating_device_until_it_throttles():
    """At the fleet's quietest hour an overheating device that only serves stays under its
    throttle temperature; one that runs a job for 15 minutes does not."""
    victim = select_devices(FLEET, hosts=["host-00"])[0]

    def after_15_minutes(job: bool):
        host = EmulatedHost(FLEET, "host-00")
        host.sync(QUIET - 900)
        host.inject_fault(victim.serial, "overheat")
        if job:
            host.occupy(victim.serial, QUIET + 60)
        host.advance(QUIET)
        return host.state(victim.serial)

    serving, training = after_15_minutes(False), after_15_minutes(True)
    assert serving.load < 0.5 and condition_of(serving).clock_share == 1.0
    assert training.load > 0.8 and training.throttle_thermal and condition_of(training).clock_share < 0.8


def test_tensor_parallel_job_names_the_overheating_device(tmp_path):
    spec = _job(8, "tensor")
    capture = run_job(spec, 1.0, emulated_conditions(_hosts(spec, at=T0, fault="overheat")), start_s=T0, seed=3)
    job = _analyse(capture, tmp_path)
    per_step = len(training_step("gpu", "tensor", 8).collectives())
    assert per_step > 4 and len(job.collectives) == capture.steps_kept * per_step
    assert _stragglers(job) == [VICTIM]


def test_a_hung_device_fails_its_rank_and_the_others_wait_to_the_end(tmp_path):
    spec = _job(8)
    capture = run_job(spec, 1.0, emulated_conditions(_hosts(spec, at=T0, fault="hang")), start_s=T0, seed=4)
    assert list(capture.failed) == [VICTIM] and "stopped answering" in capture.failed[VICTIM]
    assert sorted(capture.traces) == [r for r in range(8) if r != VICTIM]
    for trace in capture.traces.values():
        comm = trace.kind == Kind.COMM
        assert comm.any() and trace.end[comm].max() >= (T0 + 1.0) * 1e9


def test_untraced_ranks_still_set_the_pace(tmp_path):
    spec = _job(8)
    hosts = _hosts(spec, at=T0, fault="overheat")
    traced = [r for r in range(8) if r != VICTIM]
    capture = run_job(spec, 1.0, emulated_conditions(hosts), start_s=T0, seed=5, traced=traced)
    assert sorted(capture.traces) == traced and capture.untraced == [VICTIM]
    job = _analyse(capture, tmp_path)
    healthy = run_job(_job(8), 1.0, emulated_conditions(_hosts(spec, at=T0)), start_s=T0, seed=5)
    assert capture.steps_run < healthy.steps_run
    # The traced ranks spend their time waiting inside the collectives for the missing one.
    waits = [c.end_ns[r] - c.start_ns[r] for c in job.collectives for r in c.members]
    assert sorted(waits)[len(waits) // 2] > 10_000_000


def test_a_job_is_reproducible_from_its_seed():
    spec = _job(4)
    a = run_job(spec, 0.5, emulated_conditions(_hosts(spec, at=T0)), start_s=T0, seed=9)
    b = run_job(spec, 0.5, emulated_conditions(_hosts(spec, at=T0)), start_s=T0, seed=9)
    assert all(a.traces[r].ts.tolist() == b.traces[r].ts.tolist() for r in range(4))


def test_the_event_budget_keeps_whole_steps_on_every_rank():
    spec = _job(4)
    capture = run_job(spec, 1.5, emulated_conditions(_hosts(spec, at=T0)), start_s=T0, max_events=500)
    assert 0 < capture.steps_kept < capture.steps_run
    counts = {len(t) for t in capture.traces.values()}
    assert max(counts) <= 500 and len(counts) == 1
    assert all(t.meta["truncated_at_events"] == 500 for t in capture.traces.values())


def test_a_live_job_paces_itself_in_wall_clock_time_and_reports_progress():
    spec = _job(4)
    clock = {"t": T0}
    seen = []

    def sleep(s):
        clock["t"] += s

    capture = run_job_live(spec, 0.5, emulated_conditions(_hosts(spec, at=T0)), clock=lambda: clock["t"],
                           sleep=sleep, progress=lambda f, events, failed: seen.append((f, dict(events))))
    assert [f for f, _ in seen] == sorted(f for f, _ in seen) and seen[-1][0] == 1.0
    assert set(seen[-1][1]) == {0, 1, 2, 3} and all(n > 0 for n in seen[-1][1].values())
    assert all(t.span()[0] >= T0 * 1e9 for t in capture.traces.values())
    meta = capture.traces[2].meta
    assert meta["distributedInfo"]["rank"] == 2 and meta["distributedInfo"]["world_size"] == 4
    assert meta["job"] == "train-bert" and meta["device_serial"] == spec.ranks[2].serial


def test_devices_are_chosen_by_serial_host_or_type():
    fleet = FleetConfig(seed=1, hosts=3, devices_per_host=6)
    gpus = select_devices(fleet, device_type="gpu")
    assert len(gpus) == 6 and {d.type for d in gpus} == {"gpu"}
    assert {d.host for d in select_devices(fleet, hosts=["host-01"])} == {"host-01"}
    picked = [gpus[3].serial, gpus[0].serial]
    assert [d.serial for d in select_devices(fleet, serials=picked)] == picked
    with pytest.raises(ValueError, match="no device 'nope'"):
        select_devices(fleet, serials=["nope"])
    with pytest.raises(ValueError, match="no device matches"):
        select_devices(fleet, hosts=["host-09"])
    job = make_job("j", gpus)
    assert [r.rank for r in job.ranks] == list(range(6)) and job.hosts == ["host-00", "host-01", "host-02"]


@pytest.mark.parametrize(("ranks", "parallelism", "message"), [
    ((), "data", "1 to"),
    ((Rank(0, "a", "h", "gpu", "2.0"),), "pipeline", "unknown parallelism"),
    ((Rank(0, "a", "h", "gpu", "2.0"), Rank(1, "a", "h", "gpu", "2.0")), "data", "only one rank"),
    ((Rank(1, "a", "h", "gpu", "2.0"),), "data", "numbered"),
])
def test_a_bad_job_is_refused(ranks, parallelism, message):
    with pytest.raises(ValueError, match=message):
        JobSpec("j", ranks, parallelism)


def test_a_ring_goes_at_its_slowest_link():
    fast = transfer_ns(100e6, [25.0] * 8, hosts=1)
    assert transfer_ns(100e6, [25.0] * 7 + [1.5], hosts=1) > 10 * fast
    assert transfer_ns(100e6, [25.0] * 8, hosts=2) > fast  # the network between hosts
    assert transfer_ns(100e6, [25.0], hosts=1) == 0


def test_job_command_writes_one_trace_per_rank(tmp_path, capsys):
    from emulator.__main__ import main

    out = tmp_path / "job"
    argv = ["--state-dir", str(tmp_path / "state"), "--hosts", "2", "--devices-per-host", "2", "--types", "gpu"]
    assert main([*argv, "job", str(out), "--name", "bert", "--duration", "0.5"]) == 0
    assert "steps of data-parallel 'bert'" in capsys.readouterr().out
    job = analyse_job(read_job(out))
    assert job.ranks == [0, 1, 2, 3] and job.rule == RULE_PG_SEQ and job.collectives
    with pytest.raises(SystemExit, match="no device 'nope'"):
        main([*argv, "job", str(out), "--devices", "nope"])
