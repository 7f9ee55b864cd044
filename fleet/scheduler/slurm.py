"""Slurm, through its own commands (`scontrol`, `squeue`; the cluster's `SLURM_CONF`): drain
and resume a node, read its state and the jobs on its GPUs, requeue a job. Django-free.

Asicmon marks the drains it makes with a reason that begins ``asicmon:`` and resumes only
those: a node an administrator drained for their own reason stays drained. Every argument is
a separate argv entry (no shell), and a reason is one line of at most REASON_MAX characters.
"""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass

REASON_PREFIX = "asicmon: "
REASON_MAX = 200
_IDX = re.compile(r"IDX:([0-9,\-]+)")


class SchedulerError(Exception):
    """A command of the scheduler failed or could not run, said in words."""


@dataclass(frozen=True)
class NodeState:
    name: str
    state: str  # Slurm's words: IDLE, MIXED, ALLOCATED, IDLE+DRAIN, DOWN*...
    reason: str  # the drain's reason without Slurm's "[user@time]" tail; "" for none

    @property
    def drained(self) -> bool:
        """Drained or draining: no new job lands on it."""
        return "DRAIN" in self.state

    @property
    def drained_by_asicmon(self) -> bool:
        return self.drained and self.reason.startswith(REASON_PREFIX)


@dataclass(frozen=True)
class NodeJob:
    """A job running on a node: its GPU indexes there (the GRES Slurm gave it)."""

    job_id: int
    name: str
    user: str
    gpus: tuple[int, ...]
    requeue: bool


class Slurm:
    """One Slurm cluster, named by its configuration file (None: the commands' default)."""

    def __init__(self, conf: str | None = None, timeout_s: float = 10.0):
        self.conf = conf or None
        self.timeout_s = timeout_s

    def _run(self, *argv: str) -> str:
        env = {**os.environ, **({"SLURM_CONF": self.conf} if self.conf else {})}
        try:
            done = subprocess.run(list(argv), env=env, capture_output=True, text=True, timeout=self.timeout_s)
        except FileNotFoundError:
            raise SchedulerError(f"{argv[0]} is not installed here (Slurm's client commands)") from None
        except subprocess.TimeoutExpired:
            raise SchedulerError(f"{' '.join(argv[:3])} did not answer within {self.timeout_s:.0f} s") from None
        if done.returncode != 0:
            said = (done.stderr or done.stdout).strip().splitlines()
            raise SchedulerError(f"{' '.join(argv[:3])}: {said[-1] if said else f'exit {done.returncode}'}")
        return done.stdout

    # -- nodes -------------------------------------------------------------------------------
    def node(self, name: str) -> NodeState | None:
        """The node's state, or None where Slurm has no such node."""
        try:
            line = self._run("scontrol", "show", "node", name, "-o")
        except SchedulerError as exc:
            if "not found" in str(exc).lower() or "invalid node name" in str(exc).lower():
                return None
            raise
        fields = _fields(line)
        if fields.get("NodeName") != name:
            return None
        reason = line.split(" Reason=", 1)[1].strip() if " Reason=" in line else ""
        reason = re.sub(r"\s*\[[^\]]*@[^\]]*\]$", "", reason)
        return NodeState(name, fields.get("State", "UNKNOWN"), reason)

    def drain(self, name: str, reason: str) -> None:
        """Drain the node (running jobs finish, no new one starts) with Asicmon's reason."""
        self._run("scontrol", "update", f"NodeName={name}", "State=DRAIN", f"Reason={asicmon_reason(reason)}")

    def resume(self, name: str, state: NodeState | None = None) -> bool:
        """Resume the node if Asicmon drained it; False (nothing done) where someone else did.
        ``state``: the node's as just read (else read now)."""
        state = state or self.node(name)
        if state is None or not state.drained_by_asicmon:
            return False
        self._run("scontrol", "update", f"NodeName={name}", "State=RESUME")
        return True

    # -- jobs --------------------------------------------------------------------------------
    def jobs(self, name: str) -> list[NodeJob]:
        """The jobs running on the node, with the GPU indexes each holds there."""
        ids = self._run("squeue", "-h", "-w", name, "-t", "RUNNING", "-o", "%i").split()
        found = []
        for job_id in ids:
            if not job_id.isdigit():
                continue
            try:
                line = self._run("scontrol", "show", "job", "-d", "-o", job_id)
            except SchedulerError:
                continue  # ended meanwhile
            found.append(_job(int(job_id), line, name))
        return found

    def requeue(self, job_id: int) -> None:
        self._run("scontrol", "requeue", str(int(job_id)))


def asicmon_reason(text: str) -> str:
    """A drain reason Slurm keeps as one field: Asicmon's prefix, one line, bounded."""
    line = " ".join(str(text).split())
    return (REASON_PREFIX + line)[:REASON_MAX]


def _fields(line: str) -> dict[str, str]:
    out = {}
    for token in line.split():
        key, sep, value = token.partition("=")
        if sep and key not in out:
            out[key] = value
    return out


def _job(job_id: int, line: str, node: str) -> NodeJob:
    fields = _fields(line)
    user = fields.get("UserId", "").split("(", 1)[0]
    gpus: tuple[int, ...] = ()
    # The detail part: "Nodes=<node> CPU_IDs=... Mem=... GRES=gpu:2(IDX:0-1)", one per node set.
    for part in re.split(r"\s(?=Nodes=)", line):
        if part.startswith("Nodes=") and _names(part.split()[0][6:], node):
            match = _IDX.search(part)
            if match:
                gpus = tuple(_indexes(match.group(1)))
    return NodeJob(job_id, fields.get("JobName", ""), user, gpus, fields.get("Requeue") == "1")


def _names(hostlist: str, node: str) -> bool:
    """Whether Slurm's host list (``node[01-04],gpu7``) holds ``node``."""
    for item in re.findall(r"[^,\[]+(?:\[[^\]]*\])?", hostlist):
        if "[" not in item:
            if item == node:
                return True
            continue
        prefix, ranges = item.split("[", 1)
        if not node.startswith(prefix):
            continue
        rest = node[len(prefix):]
        for r in ranges.rstrip("]").split(","):
            lo, _, hi = r.partition("-")
            if rest.isdigit() and (rest == lo or (hi and len(rest) == len(lo) and lo <= rest <= hi)):
                return True
    return False


def _indexes(text: str) -> list[int]:
    out = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        if lo.isdigit():
            out.extend(range(int(lo), int(hi or lo) + 1))
    return out
