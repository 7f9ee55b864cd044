"""What the agent knows of a process that polls it for Kineto captures (fleet.agent.kineto):
its command, parent and job identity, read from ``/proc``, and its role in a job.

Only the job's identity is read from the process's environment (:data:`JOB_KEYS`: torchrun's
and Slurm's variables), never the rest of it, which may hold secrets. A torchrun launcher
imports PyTorch too and polls like its ranks (dynolog captured launchers instead of ranks,
its issue #430): it is told apart as the process that other polling processes descend from
and that has no ``RANK`` of its own.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

#: The environment variables kept: what says which job and which rank a process is.
JOB_KEYS = (
    "TORCHELASTIC_RUN_ID", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK",
    "SLURM_JOB_ID", "SLURM_PROCID", "SLURM_LOCALID", "CUDA_VISIBLE_DEVICES",
)
MAX_ENVIRON = 1 << 20  # a process's environment read at most this far
MAX_COMMAND = 512


@dataclass
class ProcessInfo:
    pid: int
    command: str = ""
    parent: int | None = None
    job: dict[str, str] = field(default_factory=dict)
    role: str = "process"  # "rank", "launcher" or "process"
    readable: bool = True  # False: /proc said no (another user's process, or gone)

    @property
    def rank(self) -> int | None:
        return _int(self.job.get("RANK"))

    @property
    def world_size(self) -> int | None:
        return _int(self.job.get("WORLD_SIZE"))

    @property
    def run_id(self) -> str | None:
        return self.job.get("TORCHELASTIC_RUN_ID") or self.job.get("SLURM_JOB_ID")


def _int(text: str | None) -> int | None:
    return int(text) if text is not None and text.strip().lstrip("-").isdigit() else None


def describe(pid: int, proc: Path = Path("/proc")) -> ProcessInfo:
    """A process as ``/proc`` shows it (what cannot be read is left empty, not an error)."""
    info = ProcessInfo(pid)
    base = proc / str(pid)
    try:
        info.command = " ".join(_read(base / "cmdline", MAX_COMMAND * 4).decode(errors="replace").split("\0")).strip()
        info.command = info.command[:MAX_COMMAND]
        stat = _read(base / "stat", 4096).decode(errors="replace")
        info.parent = int(stat[stat.rindex(")") + 2 :].split()[1])  # after the command's ')': state, ppid
    except (OSError, ValueError, IndexError):
        info.readable = False
        return info
    try:
        environ = _read(base / "environ", MAX_ENVIRON)
    except OSError:
        return info  # another user's process: no environment to read
    for entry in environ.split(b"\0"):
        key, _, value = entry.partition(b"=")
        name = key.decode(errors="replace")
        if name in JOB_KEYS:
            info.job[name] = value.decode(errors="replace")[:256]
    return info


def _read(path: Path, limit: int) -> bytes:
    with path.open("rb") as f:
        return f.read(limit)


def assign_roles(infos: Iterable[ProcessInfo], ancestors: dict[int, tuple[int, ...]]) -> None:
    """Set each process's role: a rank (it has RANK), a launcher (polling processes descend
    from it and it has no RANK), or a plain process. ``ancestors`` holds each pid's
    ancestors as libkineto reported them (nearest first)."""
    infos = list(infos)
    polling = {info.pid for info in infos}
    parents_of_others = {a for pid, chain in ancestors.items() if pid in polling for a in chain if a in polling}
    for info in infos:
        if info.rank is not None:
            info.role = "rank"
        elif info.pid in parents_of_others:
            info.role = "launcher"
        else:
            info.role = "process"


def observed(processes: list, proc: Path = Path("/proc")) -> list[tuple]:
    """Each polling process (fleet.agent.kineto.TracedProcess) with what /proc says of it,
    roles assigned."""
    infos = [describe(p.pid, proc) for p in processes]
    assign_roles(infos, {p.pid: p.ancestors for p in processes})
    return list(zip(processes, infos, strict=True))
