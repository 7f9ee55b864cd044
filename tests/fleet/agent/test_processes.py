"""Processes that poll the agent, as /proc shows them: command, parent, the job's identity
(and nothing else of their environment), and launchers told apart from ranks, on a recorded
/proc tree and on a real torchrun job (gloo, the CPU wheel)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleet.agent.processes import JOB_KEYS, ProcessInfo, assign_roles, describe
from tests.support.pytorch_jobs import served_daemon, torchrun_job, wait_until


def _proc(root: Path, pid: int, cmdline: list[str], ppid: int, environ: dict[str, str], comm: str = "python") -> None:
    folder = root / str(pid)
    folder.mkdir(parents=True)
    (folder / "cmdline").write_bytes(b"\0".join(a.encode() for a in cmdline) + b"\0")
    (folder / "stat").write_text(f"{pid} ({comm}) S {ppid} {pid} {pid} 0 -1 4194560 0 0 0 0")
    (folder / "environ").write_bytes(b"\0".join(f"{k}={v}".encode() for k, v in environ.items()) + b"\0")


def test_a_process_is_described_by_its_command_parent_and_job(tmp_path):
    _proc(tmp_path, 42, ["python", "train.py", "--lr", "0.1"], 7,
          {"RANK": "1", "WORLD_SIZE": "4", "TORCHELASTIC_RUN_ID": "abc", "AWS_SECRET_ACCESS_KEY": "s3cr3t", "PATH": "/bin"})
    info = describe(42, tmp_path)
    assert (info.command, info.parent, info.rank, info.world_size, info.run_id) == ("python train.py --lr 0.1", 7, 1, 4, "abc")
    assert set(info.job) == {"RANK", "WORLD_SIZE", "TORCHELASTIC_RUN_ID"} <= set(JOB_KEYS)  # no secret kept


def test_a_command_with_a_parenthesis_in_its_name_still_gives_its_parent(tmp_path):
    _proc(tmp_path, 5, ["x"], 3, {}, comm="a) S 99 (b")
    assert describe(5, tmp_path).parent == 3


def test_a_process_gone_or_unreadable_is_said_so_not_raised(tmp_path):
    assert describe(12345, tmp_path).readable is False


def test_a_slurm_job_identifies_a_process_without_torchrun(tmp_path):
    _proc(tmp_path, 9, ["python", "x.py"], 1, {"SLURM_JOB_ID": "881", "SLURM_PROCID": "0"})
    assert describe(9, tmp_path).run_id == "881"


def test_roles_launcher_ranks_and_a_lone_process():
    launcher, r0, r1, lone = ProcessInfo(10), ProcessInfo(11, job={"RANK": "0"}), ProcessInfo(12, job={"RANK": "1"}), ProcessInfo(30)
    assign_roles([launcher, r0, r1, lone], {10: (9, 1), 11: (10, 9, 1), 12: (10, 9, 1), 30: (1,)})
    assert [p.role for p in (launcher, r0, r1, lone)] == ["launcher", "rank", "rank", "process"]


@pytest.mark.integration
def test_a_torchrun_jobs_launcher_is_told_apart_from_its_ranks(tmp_path):
    with served_daemon(tmp_path / "traces") as daemon, \
            torchrun_job(tmp_path, [daemon.socket_dir, daemon.socket_dir], "job-7") as job:
        wait_until(lambda: len(daemon.processes) >= 3, 60, "the launcher and both ranks never polled")
        infos = [describe(pid) for pid in daemon.processes]
        assign_roles(infos, {p.pid: p.ancestors for p in daemon.processes.values()})
        by_role = {}
        for info in infos:
            by_role.setdefault(info.role, []).append(info)
        assert [p.pid for p in by_role["launcher"]] == [job.pid]
        ranks = sorted(by_role["rank"], key=lambda p: p.rank)
        assert [(p.rank, p.world_size, p.parent) for p in ranks] == [(0, 2, job.pid), (1, 2, job.pid)]
        assert {p.run_id for p in ranks} == {"job-7"} and "ddp.py" in ranks[0].command
