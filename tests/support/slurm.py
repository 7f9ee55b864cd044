"""A real one-node Slurm cluster for the tests: munge, slurmctld and slurmd from Debian
(`slurm-wlm`, `munge`; `make slurm-deps`), in a folder of the test's own, the node declaring
eight GPUs in gres.conf over empty files (GPUs without GPUs). Started as root, as CI runs."""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.support.needs import missing
from tests.support.processes import Service, free_port

MUNGE_KEY = Path("/etc/munge/munge.key")
MUNGE_SOCKET_DIR = Path("/run/munge")


@dataclass
class SlurmCluster:
    conf: Path
    node: str
    gpus: int

    def env(self) -> dict[str, str]:
        return {**os.environ, "SLURM_CONF": str(self.conf)}

    def run(self, *argv: str, check: bool = True) -> str:
        done = subprocess.run(list(argv), env=self.env(), capture_output=True, text=True, timeout=30)
        if check and done.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)}: {done.stderr.strip() or done.stdout.strip()}")
        return done.stdout

    def node_line(self) -> str:
        return self.run("scontrol", "show", "node", self.node, "-o")

    def submit(self, gpus: int, seconds: int = 120) -> int:
        out = self.run("sbatch", "--parsable", f"--gres=gpu:{gpus}", "--requeue", "-o", "/dev/null",
                       "--wrap", f"sleep {seconds}")
        return int(out.strip().split(";")[0])

    def job_state(self, job_id: int) -> str:
        out = self.run("scontrol", "show", "job", str(job_id), "-o")
        return next(part.split("=", 1)[1] for part in out.split() if part.startswith("JobState="))


def start_munge() -> None:
    """munged as the recipe starts it (a key made once; idempotent: a running one is kept)."""
    if subprocess.run(["sh", "-c", "munge -n | unmunge"], capture_output=True).returncode == 0:
        return
    munge = pwd.getpwnam("munge")
    MUNGE_SOCKET_DIR.mkdir(parents=True, exist_ok=True)
    os.chown(MUNGE_SOCKET_DIR, munge.pw_uid, munge.pw_gid)
    if not MUNGE_KEY.exists():
        MUNGE_KEY.parent.mkdir(parents=True, exist_ok=True)
        MUNGE_KEY.write_bytes(os.urandom(1024))
        os.chown(MUNGE_KEY, munge.pw_uid, munge.pw_gid)
        MUNGE_KEY.chmod(0o400)
    subprocess.run(["su", "-s", "/bin/sh", "munge", "-c", "/usr/sbin/munged --force"], check=True, timeout=30)
    deadline = time.monotonic() + 10
    while subprocess.run(["sh", "-c", "munge -n | unmunge"], capture_output=True).returncode != 0:
        if time.monotonic() > deadline:
            raise RuntimeError("munged started but munge -n | unmunge does not succeed")
        time.sleep(0.2)


def _config(folder: Path, node: str, gpus: int) -> Path:
    (folder / "state").mkdir()
    (folder / "spool").mkdir()
    devices = folder / "dev"
    devices.mkdir()
    for k in range(gpus):
        (devices / f"nvidia{k}").touch()
    conf = folder / "slurm.conf"
    conf.write_text("\n".join([
        "ClusterName=asicmon-test", f"SlurmctldHost={node}", "SlurmUser=root",
        f"SlurmctldPort={free_port()}", f"SlurmdPort={free_port()}",
        f"StateSaveLocation={folder / 'state'}", f"SlurmdSpoolDir={folder / 'spool'}",
        f"SlurmctldPidFile={folder / 'slurmctld.pid'}", f"SlurmdPidFile={folder / 'slurmd.pid'}",
        f"SlurmctldLogFile={folder / 'slurmctld.log'}", f"SlurmdLogFile={folder / 'slurmd.log'}",
        "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none", "SelectType=select/cons_tres",
        "GresTypes=gpu", "AuthType=auth/munge", "AccountingStorageType=accounting_storage/none",
        "JobCompType=jobcomp/none", "MpiDefault=none", "ReturnToService=2", "SchedulerType=sched/builtin",
        f"NodeName={node} CPUs=2 Gres=gpu:{gpus} State=UNKNOWN",
        f"PartitionName=main Nodes={node} Default=YES MaxTime=INFINITE State=UP",
    ]) + "\n")
    (folder / "gres.conf").write_text(f"NodeName={node} Name=gpu File={devices}/nvidia[0-{gpus - 1}]\n")
    return conf


@contextlib.contextmanager
def slurm_cluster(folder: Path, gpus: int = 8) -> Iterator[SlurmCluster]:
    """slurmctld and slurmd on this machine (its short host name is the node), the node
    resumed and idle; stopped after."""
    if os.geteuid() != 0 or not shutil.which("slurmctld") or not shutil.which("munged"):
        missing("a real Slurm cluster needs root and Debian's slurm-wlm and munge (make slurm-deps)")
    start_munge()
    node = socket.gethostname().split(".")[0]
    conf = _config(folder, node, gpus)
    cluster = SlurmCluster(conf, node, gpus)
    env = cluster.env()
    daemons = [Service("slurmctld", ["slurmctld", "-D", "-f", str(conf)], env)]
    try:
        _wait(lambda: cluster.run("scontrol", "ping", check=False).find("UP") >= 0, "slurmctld never answered")
        daemons.append(Service("slurmd", ["slurmd", "-D", "-f", str(conf)], env))
        _wait(lambda: "State=" in cluster.run("scontrol", "show", "node", node, "-o", check=False), "no node")
        cluster.run("scontrol", "update", f"NodeName={node}", "State=RESUME", check=False)
        _wait(lambda: "State=IDLE" in cluster.node_line(), "the node never became idle")
        yield cluster
    finally:
        for daemon in reversed(daemons):
            daemon.stop()


def _wait(condition, what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise RuntimeError(what)
        time.sleep(0.2)
